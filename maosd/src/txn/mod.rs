//! The transaction: a project's live state and the [`Txn`](state::Txn) that changes it
//! (`state`), the lock table's changes inside it (`locks`), and the kept versions of held files
//! it names (`keep`). Imports `base`, `proc` (the effects it carries) and `radar` (the handle
//! its state holds); everything above changes state through it.

pub mod keep;
pub mod locks;
pub mod state;
