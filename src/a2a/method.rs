//! The 11 JSON-RPC methods of A2A 1.0 (spec §5.3, §9.4). Nothing else is accepted.

use std::fmt;

/// One A2A 1.0 JSON-RPC method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl Method {
    /// Every method, in the order of the specification.
    pub const ALL: [Method; 11] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::DeleteTaskPushNotificationConfig,
        Method::GetExtendedAgentCard,
    ];

    /// The wire name (PascalCase, as the gRPC RPC).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::SendMessage => "SendMessage",
            Method::SendStreamingMessage => "SendStreamingMessage",
            Method::GetTask => "GetTask",
            Method::ListTasks => "ListTasks",
            Method::CancelTask => "CancelTask",
            Method::SubscribeToTask => "SubscribeToTask",
            Method::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Method::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Method::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Method::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Method::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The method with this exact wire name (case-sensitive, as the SDKs).
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether a successful answer is a stream of server-sent events.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(m));
            assert_eq!(Method::from_name(&m.as_str().to_lowercase()), None);
        }
        for legacy in [
            "message/send",
            "tasks/get",
            "tasks/resubscribe",
            "",
            "SendMessage ",
        ] {
            assert_eq!(Method::from_name(legacy), None, "{legacy:?}");
        }
    }
}
