//! Capacity no one client can take, for the server's counted resources (HTTP connections,
//! WebSocket sessions) and its keyed state (named sessions, audit campaigns):
//!
//! * [`ClientKey`]: who a client is for its share: an IPv4 address, or an IPv6 address's /64
//!   prefix (one host is normally given a whole /64, so counting its addresses one by one would
//!   give it any number of shares). An IPv4-mapped IPv6 address is its IPv4 address.
//! * [`FairShare`]: a counted pool of slots with a per-client cap and a **reserve**: once the
//!   pool is fuller than its capacity less the reserve, only clients holding fewer than a few
//!   slots ([`ShareLimits::few`]) may take more. The reserve is an eighth of the capacity (at
//!   least 9 slots, at most half; a pool under 18 slots keeps none) and `few` is small enough
//!   that 8 clients cannot spend it (8 × `few` < reserve), so any 8 clients holding all they can
//!   get leave room for a new one.
//! * [`make_room`]: the eviction rule of the keyed maps (sessions, campaigns): a client at its
//!   quota gives up its own least recently used entry; a full map gives up the least recently
//!   used entry of the client holding the most when it holds more than the newcomer, else the
//!   newcomer's own, so a newcomer is served before anyone is refused.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Length of the IPv6 prefix one client is counted by.
pub const IPV6_CLIENT_PREFIX: u8 = 64;

/// A client for the server's shares and quotas: an IPv4 address or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of a client address.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let mask = u128::MAX << (128 - u32::from(IPV6_CLIENT_PREFIX));
                    Self(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)))
                }
            },
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/{IPV6_CLIENT_PREFIX}"),
        }
    }
}

/// Why a [`FairShare`] slot was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client holds its cap.
    ClientCap(usize),
    /// The rest of the pool is kept for clients holding few slots.
    Reserved { reserve: usize, few: usize },
    /// Every slot is taken.
    Full(usize),
}

/// The sizes of a [`FairShare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    pub capacity: usize,
    pub per_client: usize,
    /// Slots only clients holding fewer than `few` may take.
    pub reserve: usize,
    /// A client holding fewer slots than this may use the reserve.
    pub few: usize,
}

/// How many clients holding all they can get must still leave room for a new one.
pub const GUARANTEED_CLIENTS: usize = 8;

impl ShareLimits {
    /// `capacity` slots, `per_client` each; the reserve and `few` as in the module docs.
    pub fn new(capacity: usize, per_client: usize) -> Self {
        let capacity = capacity.max(1);
        // Under twice the smallest useful reserve a pool is too small to keep one.
        let reserve = if capacity < 2 * (GUARANTEED_CLIENTS + 1) {
            0
        } else {
            (capacity / 8).max(GUARANTEED_CLIENTS + 1).min(capacity / 2)
        };
        let few = (reserve.saturating_sub(1) / GUARANTEED_CLIENTS).clamp(1, 4);
        Self {
            capacity,
            per_client: per_client.max(1),
            reserve,
            few,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    held: HashMap<ClientKey, usize>,
}

/// A counted pool of slots shared fairly among clients (see the module docs).
#[derive(Debug, Clone)]
pub struct FairShare {
    limits: ShareLimits,
    counts: Arc<Mutex<Counts>>,
    freed: Arc<tokio::sync::Notify>,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    key: Option<ClientKey>,
    counts: Arc<Mutex<Counts>>,
    freed: Arc<tokio::sync::Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.total -= 1;
        if let Some(k) = self.key {
            if let Some(n) = c.held.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    c.held.remove(&k);
                }
            }
        }
        drop(c);
        self.freed.notify_one();
    }
}

impl FairShare {
    pub fn new(limits: ShareLimits) -> Self {
        Self {
            limits,
            counts: Arc::default(),
            freed: Arc::default(),
        }
    }

    pub fn limits(&self) -> ShareLimits {
        self.limits
    }

    /// Take a slot for `key` (`None`: a peer outside the per-client shares, such as a trusted
    /// proxy that multiplexes many clients: only the capacity applies).
    pub fn try_acquire(&self, key: Option<ClientKey>) -> Result<Slot, Refusal> {
        let l = self.limits;
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.total >= l.capacity {
            return Err(Refusal::Full(l.capacity));
        }
        if let Some(k) = key {
            let held = c.held.get(&k).copied().unwrap_or(0);
            if held >= l.per_client {
                return Err(Refusal::ClientCap(l.per_client));
            }
            if held >= l.few && c.total >= l.capacity - l.reserve {
                return Err(Refusal::Reserved {
                    reserve: l.reserve,
                    few: l.few,
                });
            }
            *c.held.entry(k).or_insert(0) += 1;
        }
        c.total += 1;
        Ok(Slot {
            key,
            counts: self.counts.clone(),
            freed: self.freed.clone(),
        })
    }

    /// Slots taken now.
    pub fn taken(&self) -> usize {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// Wait until a slot is free (returns at once when one is).
    pub async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            if self.taken() < self.limits.capacity {
                return;
            }
            freed.await;
        }
    }
}

/// One entry of a keyed map, as [`make_room`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub id: &'a str,
    pub owner: Option<ClientKey>,
    pub last_used: Instant,
    /// Finished work (a finished campaign): given up before anything unfinished.
    pub finished: bool,
}

/// What [`make_room`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room {
    /// There is room already.
    Free,
    /// Drop this entry first.
    Evict(String),
    /// The map is full of entries of clients holding no more than the newcomer.
    Full,
}

/// Make room for one more entry of `owner` in a map of `capacity` entries, `quota` per client
/// (see the module docs). Entries without an owner count toward the capacity only.
pub fn make_room<'a>(
    entries: impl Iterator<Item = Held<'a>> + Clone,
    owner: Option<ClientKey>,
    quota: usize,
    capacity: usize,
) -> Room {
    let lru = |it: &mut dyn Iterator<Item = Held<'a>>| {
        it.min_by_key(|h| (!h.finished, h.last_used))
            .map(|h| Room::Evict(h.id.to_owned()))
    };
    let mut held: HashMap<Option<ClientKey>, usize> = HashMap::new();
    let mut total = 0usize;
    for h in entries.clone() {
        *held.entry(h.owner).or_insert(0) += 1;
        total += 1;
    }
    let mine = owner.map_or(0, |o| held.get(&Some(o)).copied().unwrap_or(0));
    if owner.is_some() && mine >= quota.max(1) {
        if let Some(r) = lru(&mut entries.clone().filter(|h| h.owner == owner)) {
            return r;
        }
    }
    if total < capacity.max(1) {
        return Room::Free;
    }
    if let Some(r) = lru(&mut entries.clone().filter(|h| h.finished)) {
        return r;
    }
    let heaviest = held
        .iter()
        .filter(|(o, _)| o.is_some())
        .max_by_key(|(o, n)| (**n, **o))
        .map(|(o, n)| (*o, *n));
    // From the heaviest client when it holds more than the newcomer would, else from the
    // newcomer's own (it keeps its count); refused only to a client holding nothing in a map
    // full of clients holding one each.
    let from = match heaviest {
        Some((o, n)) if n > mine + 1 => o,
        _ if mine > 0 => owner,
        _ => return Room::Full,
    };
    lru(&mut entries.filter(|h| h.owner == from)).unwrap_or(Room::Full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a = ClientKey::of(ip("2001:db8:1:2:aaaa::1"));
        assert_eq!(a, ClientKey::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")));
        assert_ne!(a, ClientKey::of(ip("2001:db8:1:3::1")));
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(
            ClientKey::of(ip("::ffff:10.0.0.7")),
            ClientKey::of(ip("10.0.0.7"))
        );
        assert_ne!(ClientKey::of(ip("10.0.0.7")), ClientKey::of(ip("10.0.0.8")));
        assert_eq!(ClientKey::of(ip("10.0.0.7")).to_string(), "10.0.0.7");
    }

    #[test]
    fn eight_clients_at_their_cap_leave_room_for_a_new_one() {
        let pool = FairShare::new(ShareLimits::new(1024, 256));
        let mut held = vec![];
        for i in 0..8 {
            let k = Some(ClientKey::of(ip(&format!("10.0.0.{i}"))));
            while let Ok(s) = pool.try_acquire(k) {
                held.push(s);
            }
        }
        let l = pool.limits();
        assert_eq!((l.reserve, l.few), (128, 4));
        assert!(pool.taken() < 1024 - 128 + 8 * 4, "{}", pool.taken());
        for i in 0..30 {
            let k = Some(ClientKey::of(ip(&format!("10.1.0.{i}"))));
            held.push(pool.try_acquire(k).expect("a newcomer gets a slot"));
        }
        // The fourth client got 128 before the reserve was reached; it gets no more.
        let k = Some(ClientKey::of(ip("10.0.0.3")));
        assert_eq!(
            pool.try_acquire(k).unwrap_err(),
            Refusal::Reserved {
                reserve: 128,
                few: 4
            }
        );
        let k = Some(ClientKey::of(ip("10.0.0.1")));
        assert_eq!(pool.try_acquire(k).unwrap_err(), Refusal::ClientCap(256));
        // Small pools keep room for a ninth client too.
        for capacity in [18, 40, 100, 300] {
            let pool = FairShare::new(ShareLimits::new(capacity, capacity));
            let mut held = vec![];
            for i in 0..8 {
                let k = Some(ClientKey::of(ip(&format!("10.2.0.{i}"))));
                while let Ok(s) = pool.try_acquire(k) {
                    held.push(s);
                }
            }
            let k = Some(ClientKey::of(ip("10.3.0.1")));
            assert!(pool.try_acquire(k).is_ok(), "capacity {capacity}");
        }
        held.clear();
        assert!(pool.try_acquire(k).is_ok(), "slots come back when dropped");
        // Outside the shares (a trusted proxy): only the capacity applies.
        let small = FairShare::new(ShareLimits::new(3, 1));
        let all: Vec<Slot> = (0..3).map(|_| small.try_acquire(None).unwrap()).collect();
        assert_eq!(small.try_acquire(None).unwrap_err(), Refusal::Full(3));
        drop(all);
        let k = Some(ClientKey::of(ip("10.0.0.1")));
        let _one = small.try_acquire(k).unwrap();
        assert_eq!(small.try_acquire(k).unwrap_err(), Refusal::ClientCap(1));
    }

    fn held<'a>(id: &'a str, owner: &str, age_s: u64, finished: bool) -> Held<'a> {
        Held {
            id,
            owner: Some(ClientKey::of(ip(owner))),
            last_used: Instant::now() - Duration::from_secs(age_s),
            finished,
        }
    }

    #[test]
    fn room_is_made_from_the_heaviest_client_and_finished_work_first() {
        let a = Some(ClientKey::of(ip("10.0.0.1")));
        let b = Some(ClientKey::of(ip("10.0.0.2")));
        let c = Some(ClientKey::of(ip("10.0.0.3")));
        let entries = [
            held("a1", "10.0.0.1", 50, false),
            held("a2", "10.0.0.1", 60, false),
            held("a3", "10.0.0.1", 10, false),
            held("b1", "10.0.0.2", 99, false),
        ];
        // Room left: nothing to drop.
        assert_eq!(make_room(entries.iter().copied(), c, 3, 5), Room::Free);
        // At its quota a client gives up its own oldest entry, room or not.
        assert_eq!(
            make_room(entries.iter().copied(), a, 3, 5),
            Room::Evict("a2".into())
        );
        // Full: the heaviest client's oldest entry goes, not the oldest overall (b1).
        assert_eq!(
            make_room(entries.iter().copied(), c, 3, 4),
            Room::Evict("a2".into())
        );
        // From the heaviest only while it holds more than the newcomer would.
        assert_eq!(
            make_room(entries.iter().copied(), b, 3, 4),
            Room::Evict("a2".into())
        );
        let even = [
            held("a1", "10.0.0.1", 5, false),
            held("b1", "10.0.0.2", 9, false),
        ];
        assert_eq!(make_room(even.iter().copied(), c, 3, 2), Room::Full);
        // Else from the newcomer's own.
        assert_eq!(
            make_room(even.iter().copied(), a, 3, 2),
            Room::Evict("a1".into())
        );
        // Finished work goes first when the map is full.
        let mut with_done = entries.to_vec();
        with_done[3].finished = true;
        assert_eq!(
            make_room(with_done.iter().copied(), c, 3, 4),
            Room::Evict("b1".into())
        );
    }
}
