//! The A2A methods a rule grants: names, or the classes `read`, `write`, `push`, `card`, `*`.

use crate::a2a::Method;

/// A set of A2A methods (one bit each, in the order of [`Method::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MethodSet(u16);

impl MethodSet {
    pub const EMPTY: MethodSet = MethodSet(0);
    pub const ALL: MethodSet = MethodSet((1 << Method::ALL.len()) - 1);

    fn bit(m: Method) -> u16 {
        let i = Method::ALL.iter().position(|x| *x == m).unwrap_or(0);
        1 << i
    }

    pub fn of(methods: &[Method]) -> MethodSet {
        MethodSet(methods.iter().fold(0, |acc, m| acc | Self::bit(*m)))
    }

    pub fn contains(self, m: Method) -> bool {
        self.0 & Self::bit(m) != 0
    }

    pub fn union(self, other: MethodSet) -> MethodSet {
        MethodSet(self.0 | other.0)
    }

    /// The methods in the set, in the specification's order.
    pub fn methods(self) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| self.contains(*m))
            .collect()
    }

    /// Parses a rule's `methods`: A2A method names (exact, case-sensitive) and classes.
    /// `Err` gives the entry that is neither.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<MethodSet, String> {
        let mut set = MethodSet::EMPTY;
        for e in entries {
            let e = e.as_ref();
            let add = match (MethodClass::parse(e), Method::from_name(e)) {
                (Some(class), _) => class.methods(),
                (None, Some(m)) => MethodSet::of(&[m]),
                (None, None) if e == "*" => MethodSet::ALL,
                (None, None) => return Err(e.to_string()),
            };
            set = set.union(add);
        }
        Ok(set)
    }
}

/// A class of methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodClass {
    /// GetTask, ListTasks, SubscribeToTask.
    Read,
    /// SendMessage, SendStreamingMessage, CancelTask.
    Write,
    /// The four push-config methods.
    Push,
    /// GetExtendedAgentCard.
    Card,
}

impl MethodClass {
    pub const ALL: [MethodClass; 4] = [
        MethodClass::Read,
        MethodClass::Write,
        MethodClass::Push,
        MethodClass::Card,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MethodClass::Read => "read",
            MethodClass::Write => "write",
            MethodClass::Push => "push",
            MethodClass::Card => "card",
        }
    }

    pub fn parse(s: &str) -> Option<MethodClass> {
        MethodClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The class a method belongs to.
    pub fn of(m: Method) -> MethodClass {
        match m {
            Method::GetTask | Method::ListTasks | Method::SubscribeToTask => MethodClass::Read,
            Method::SendMessage | Method::SendStreamingMessage | Method::CancelTask => {
                MethodClass::Write
            }
            Method::CreateTaskPushNotificationConfig
            | Method::GetTaskPushNotificationConfig
            | Method::ListTaskPushNotificationConfigs
            | Method::DeleteTaskPushNotificationConfig => MethodClass::Push,
            Method::GetExtendedAgentCard => MethodClass::Card,
        }
    }

    pub fn methods(self) -> MethodSet {
        MethodSet::of(
            &Method::ALL
                .into_iter()
                .filter(|m| MethodClass::of(*m) == self)
                .collect::<Vec<_>>(),
        )
    }
}

/// The set in words: whole classes by name, the rest by method name.
pub fn describe(set: MethodSet) -> String {
    if set == MethodSet::ALL {
        return "*".into();
    }
    let mut out: Vec<&str> = Vec::new();
    let mut covered = MethodSet::EMPTY;
    for c in MethodClass::ALL {
        if set.union(c.methods()) == set {
            out.push(c.as_str());
            covered = covered.union(c.methods());
        }
    }
    for m in set.methods() {
        if !covered.contains(m) {
            out.push(m.as_str());
        }
    }
    out.join(", ")
}
