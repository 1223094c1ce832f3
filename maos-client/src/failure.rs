//! A command's failure: the error body to print (and, with `--json`, to answer) and the exit
//! code: 1 the daemon refused the request, 2 a bad command line, 3 no daemon to talk to.

use maos_proto::{ErrorBody, ErrorCode};

use crate::client::ClientError;

/// A command's failure: what to print and how to exit.
pub struct Failure {
    pub body: ErrorBody,
    pub exit: u8,
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let exit = match e {
            ClientError::Remote(_) => 1,
            ClientError::Unavailable(_) => 3,
            ClientError::Mismatch(_) => 1,
        };
        Failure {
            body: e.body(),
            exit,
        }
    }
}

pub fn usage(msg: impl Into<String>) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, msg),
        exit: 2,
    }
}

pub type Res<T = ()> = Result<T, Failure>;
