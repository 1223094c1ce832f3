//! A hook call as the daemon holds it: the client's call ([`HookCall`], the wire's, which
//! derefs to it) and what the daemon found of it on arrival: where its files' locks live, the
//! files they name through hard links, the directories and git index a shell command writes,
//! what the files held after the call, and why a file may not be written. None of it is on the
//! wire: a client cannot say it, so the daemon never has to forget what a client said.

use std::ops::{Deref, DerefMut};

use maos_proto::{Elsewhere, GitUse, HookCall, SeenFile};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hook {
    pub call: HookCall,
    /// A file the call writes may not be written (outside the project where that is denied,
    /// in another maos project, or where it lands cannot be told): why.
    pub path_error: Option<String>,
    /// The files a write lands on outside every project the daemon knows (absolute, links
    /// resolved), which `outside_project = "allow"` lets it write unlocked, recorded.
    pub outside: Vec<String>,
    /// PostToolUse: the files the call wrote and, after a shell command, the held files, as
    /// the daemon found them (hashed, kept): the holders' versions and the changes others made
    /// to them (issue 31 §2).
    pub seen: Vec<SeenFile>,
    /// The files the call writes whose lock lives in another project (a repository nested in
    /// this one, a submodule, the repository a window started above it writes into): each
    /// file's project and its key there. Their locks are taken there.
    pub elsewhere: Vec<Elsewhere>,
    /// A file the call names through a hard link to a file another lock holds (one inode), as
    /// `[named key, held key]`; the call asks for the held key's lock too, and a denial says
    /// why.
    pub hard_links: Vec<[String; 2]>,
    /// Keys among `paths` that a shell command removes or moves away and that are
    /// directories: locked as directories (everything under them).
    pub directories: Vec<String>,
    /// The git commands of a shell call that discard or capture working-tree changes, each
    /// with the keys it is limited to.
    pub git: Vec<GitUse>,
    /// The key of the git index a shell call's git commands write (`.git/index`, or a linked
    /// worktree's): the call takes it for the command's duration, so two agents' git commands
    /// take turns instead of failing on `index.lock`.
    pub git_index: Option<String>,
}

impl From<HookCall> for Hook {
    fn from(call: HookCall) -> Hook {
        Hook {
            call,
            ..Hook::default()
        }
    }
}

impl Deref for Hook {
    type Target = HookCall;
    fn deref(&self) -> &HookCall {
        &self.call
    }
}

impl DerefMut for Hook {
    fn deref_mut(&mut self) -> &mut HookCall {
        &mut self.call
    }
}

impl Hook {
    /// [`HookCall::writes_files`], counting a shell command's files that land outside the
    /// project or in another one (the daemon found those).
    pub fn writes_files(&self) -> bool {
        self.call.writes_files()
            || (self.call.is_shell() && !(self.elsewhere.is_empty() && self.outside.is_empty()))
    }
}
