//! Who may hold the daemon's connections (issue 30): a full daemon must never make a hook wait
//! until its deadline lets a write through. Every connection says its kind in its hello; the
//! daemon takes it only when its kind's lane has room, and otherwise tells it so at once.
//!
//! - The last `reserved` slots of `max` are for hooks and `maos` commands only.
//! - Long-lived connections (subscriptions, MCP servers, lock waits) share a cap of their own,
//!   `long`, below what the others may take, whatever their hello said: a connection that
//!   subscribes or waits for a lock moves into that lane (and is refused when it is full).
//! - Idle connections of the other kinds are closed after `idle` (the connection's loop).
//!
//! Pure bookkeeping: no I/O; the connection holds a [`Slot`], whose drop gives it back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use maos_proto::ClientKind;

/// The limits, from `max_connections` and `connection_idle` in `config.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max: usize,
    /// Of those, the last ones only hooks and `maos` commands may take.
    pub reserved: usize,
    /// Long-lived connections (follow, mcp, waiter) at most.
    pub long: usize,
    /// A connection of another kind with no request for this long is closed.
    pub idle: Duration,
}

impl Limits {
    /// The default `max_connections` (see DESIGN: measured with `maos-bench connections`).
    pub const DEFAULT_MAX: usize = 1024;
    /// The smallest `max_connections` taken: room for a reserved lane and a few others.
    pub const MIN_MAX: usize = 16;
    /// The default `connection_idle`.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(60);

    /// The lanes of `max` connections: an eighth reserved for hooks and commands, half for
    /// long-lived connections.
    pub fn of(max: usize, idle: Duration) -> Limits {
        let max = max.max(Limits::MIN_MAX);
        Limits {
            max,
            reserved: (max / 8).max(2),
            long: max / 2,
            idle,
        }
    }

    /// What the lanes other than hooks' and commands' may hold together.
    fn general(&self) -> usize {
        self.max - self.reserved
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    long: usize,
    by_kind: [usize; ClientKind::ALL.len()],
}

fn index(kind: ClientKind) -> usize {
    ClientKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(ClientKind::ALL.len() - 1)
}

impl Counts {
    fn of(&self, kind: ClientKind) -> usize {
        self.by_kind[index(kind)]
    }
}

/// The daemon's connection lanes.
#[derive(Debug)]
pub struct Lanes {
    limits: Limits,
    counts: Mutex<Counts>,
}

/// A connection admitted, as `kind`; dropping it frees its place.
#[derive(Debug)]
pub struct Slot {
    lanes: Arc<Lanes>,
    kind: ClientKind,
}

impl Lanes {
    pub fn new(limits: Limits) -> Arc<Lanes> {
        Arc::new(Lanes {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        // Plain counters: a panic elsewhere while it was held leaves them usable.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Take a connection of `kind`, or say in one line why not.
    pub fn admit(self: &Arc<Self>, kind: ClientKind) -> Result<Slot, String> {
        let mut c = self.counts();
        let l = self.limits;
        let n = c.of(kind);
        let k = kind.as_str();
        let reserved_for_it = matches!(kind, ClientKind::Hook | ClientKind::Cli);
        if c.total >= l.max {
            return Err(format!(
                "too many connections ({n} of kind {k}): all {} of max_connections are open",
                l.max
            ));
        }
        if !reserved_for_it && c.total >= l.general() {
            return Err(format!(
                "too many connections ({n} of kind {k}): {} of max_connections = {} are open \
                 and the last {} are kept for hooks and maos commands",
                c.total, l.max, l.reserved
            ));
        }
        if kind.long_lived() && c.long >= l.long {
            return Err(long_full(n, kind, l));
        }
        c.total += 1;
        c.long += usize::from(kind.long_lived());
        c.by_kind[index(kind)] += 1;
        Ok(Slot {
            lanes: self.clone(),
            kind,
        })
    }

    /// How many connections of each kind are open.
    #[cfg(test)]
    pub fn open(&self) -> Vec<(ClientKind, usize)> {
        let c = self.counts();
        ClientKind::ALL.iter().map(|k| (*k, c.of(*k))).collect()
    }
}

fn long_full(n: usize, kind: ClientKind, l: Limits) -> String {
    format!(
        "too many connections ({n} of kind {}): subscriptions, MCP servers and lock waits may \
         hold {} of max_connections = {}",
        kind.as_str(),
        l.long,
        l.max
    )
}

impl Slot {
    pub fn kind(&self) -> ClientKind {
        self.kind
    }

    /// The connection is now a `to` (it subscribed, or its request waits for a lock): it moves
    /// lanes, refused when it would go over the long-lived cap.
    pub fn become_kind(&mut self, to: ClientKind) -> Result<(), String> {
        if to == self.kind {
            return Ok(());
        }
        let mut c = self.lanes.counts();
        let l = self.lanes.limits;
        let joins_long = to.long_lived() && !self.kind.long_lived();
        if joins_long && c.long >= l.long {
            return Err(long_full(c.of(to), to, l));
        }
        c.by_kind[index(self.kind)] -= 1;
        c.by_kind[index(to)] += 1;
        if joins_long {
            c.long += 1;
        } else if self.kind.long_lived() && !to.long_lived() {
            c.long -= 1;
        }
        self.kind = to;
        Ok(())
    }

    /// Whether an idle connection of this kind is closed after the idle limit: not one that
    /// stays open on purpose.
    pub fn closes_when_idle(&self) -> bool {
        !self.kind.long_lived()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.lanes.counts();
        c.total -= 1;
        c.long -= usize::from(self.kind.long_lived());
        c.by_kind[index(self.kind)] -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(max: usize) -> Arc<Lanes> {
        Lanes::new(Limits::of(max, Limits::DEFAULT_IDLE))
    }

    #[test]
    fn others_never_take_the_reserved_lane() {
        let lanes = lanes(40);
        let l = lanes.limits();
        assert_eq!((l.reserved, l.long), (5, 20));
        let others: Vec<Slot> = (0..35)
            .map(|_| lanes.admit(ClientKind::Other).unwrap())
            .collect();
        let refused = lanes.admit(ClientKind::Other).unwrap_err();
        assert!(
            refused.starts_with("too many connections (35 of kind other)"),
            "{refused}"
        );
        let hooks: Vec<Slot> = (0..5)
            .map(|_| lanes.admit(ClientKind::Hook).unwrap())
            .collect();
        let full = lanes.admit(ClientKind::Cli).unwrap_err();
        assert!(
            full.contains("(0 of kind cli)") && full.contains("all 40"),
            "{full}"
        );
        drop(hooks);
        assert!(lanes.admit(ClientKind::Cli).is_ok());
        drop(others);
        assert!(lanes.open().iter().all(|(_, n)| *n == 0));
    }

    #[test]
    fn long_lived_connections_have_their_own_cap_also_when_they_turn_so() {
        let lanes = lanes(40);
        let subs: Vec<Slot> = (0..20)
            .map(|_| lanes.admit(ClientKind::Follow).unwrap())
            .collect();
        let refused = lanes.admit(ClientKind::Mcp).unwrap_err();
        assert!(refused.contains("(0 of kind mcp)"), "{refused}");
        // A command that subscribes, or waits for a lock, is long-lived now: refused too.
        let mut cli = lanes.admit(ClientKind::Cli).unwrap();
        let refused = cli.become_kind(ClientKind::Waiter).unwrap_err();
        assert!(refused.contains("(0 of kind waiter)"), "{refused}");
        assert_eq!(cli.kind(), ClientKind::Cli);
        drop(subs);
        cli.become_kind(ClientKind::Waiter).unwrap();
        assert!(!cli.closes_when_idle());
        cli.become_kind(ClientKind::Cli).unwrap();
        assert!(cli.closes_when_idle());
        drop(cli);
        let open = lanes.open();
        assert!(open.iter().all(|(_, n)| *n == 0), "{open:?}");
        assert_eq!(lanes.counts().long, 0);
    }
}
