//! The edge, on top: what the whole daemon holds across projects and its connections. The
//! windows it remembers (`windows`), who it is in a fleet and a request's time bound there
//! (`fleet`), what every connection shares (`daemon`), a hook call's writes placed in the
//! project each belongs to (`scope`), one connection (`conn`), socket activation
//! (`activation`) and the server (`server`: start-up, accept loop, shutdown). May import every
//! floor below.

pub mod activation;
pub mod conn;
pub mod daemon;
pub mod fleet;
pub mod scope;
pub mod server;
pub mod windows;
