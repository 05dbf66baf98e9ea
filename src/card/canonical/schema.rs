//! The `AgentCard` message tree of a2a.proto v1.0.1 (reference/a2a-v1.0.1.proto, lines
//! 336–646): the only fields a card signature covers. `AgentCard.signatures` is absent on
//! purpose: the signature never covers itself.

/// How the protobuf parser reads a field and `MessageToDict` prints it back.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// `string` (plain or `optional`: an empty string is pruned either way).
    Str,
    /// Plain proto3 `bool`: false is the default and is not printed.
    Bool,
    /// `optional bool`: an explicit false is printed.
    OptBool,
    Msg(&'static Message),
    RepStr,
    RepMsg(&'static Message),
    /// `map<string, string>`.
    MapStr,
    MapMsg(&'static Message),
    /// `google.protobuf.Struct`: any JSON object, kept as is (numbers are doubles either way).
    Struct,
}

pub(super) struct Field {
    /// The ProtoJSON (lowerCamelCase) name, the one printed.
    pub json: &'static str,
    /// The proto field name, which the parser also accepts.
    pub proto: &'static str,
    pub kind: Kind,
}

pub(super) struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
    /// All fields belong to one `oneof` (SecurityScheme.scheme, OAuthFlows.flow).
    pub oneof: bool,
}

const fn f(json: &'static str, proto: &'static str, kind: Kind) -> Field {
    Field { json, proto, kind }
}

pub(super) static AGENT_CARD: Message = Message {
    name: "AgentCard",
    oneof: false,
    fields: &[
        f("name", "name", Kind::Str),
        f("description", "description", Kind::Str),
        f(
            "supportedInterfaces",
            "supported_interfaces",
            Kind::RepMsg(&AGENT_INTERFACE),
        ),
        f("provider", "provider", Kind::Msg(&AGENT_PROVIDER)),
        f("version", "version", Kind::Str),
        f("documentationUrl", "documentation_url", Kind::Str),
        f(
            "capabilities",
            "capabilities",
            Kind::Msg(&AGENT_CAPABILITIES),
        ),
        f(
            "securitySchemes",
            "security_schemes",
            Kind::MapMsg(&SECURITY_SCHEME),
        ),
        f(
            "securityRequirements",
            "security_requirements",
            Kind::RepMsg(&SECURITY_REQUIREMENT),
        ),
        f("defaultInputModes", "default_input_modes", Kind::RepStr),
        f("defaultOutputModes", "default_output_modes", Kind::RepStr),
        f("skills", "skills", Kind::RepMsg(&AGENT_SKILL)),
        f("iconUrl", "icon_url", Kind::Str),
    ],
};

static AGENT_INTERFACE: Message = Message {
    name: "AgentInterface",
    oneof: false,
    fields: &[
        f("url", "url", Kind::Str),
        f("protocolBinding", "protocol_binding", Kind::Str),
        f("tenant", "tenant", Kind::Str),
        f("protocolVersion", "protocol_version", Kind::Str),
    ],
};

static AGENT_PROVIDER: Message = Message {
    name: "AgentProvider",
    oneof: false,
    fields: &[
        f("url", "url", Kind::Str),
        f("organization", "organization", Kind::Str),
    ],
};

static AGENT_CAPABILITIES: Message = Message {
    name: "AgentCapabilities",
    oneof: false,
    fields: &[
        f("streaming", "streaming", Kind::OptBool),
        f("pushNotifications", "push_notifications", Kind::OptBool),
        f("extensions", "extensions", Kind::RepMsg(&AGENT_EXTENSION)),
        f("extendedAgentCard", "extended_agent_card", Kind::OptBool),
    ],
};

static AGENT_EXTENSION: Message = Message {
    name: "AgentExtension",
    oneof: false,
    fields: &[
        f("uri", "uri", Kind::Str),
        f("description", "description", Kind::Str),
        f("required", "required", Kind::Bool),
        f("params", "params", Kind::Struct),
    ],
};

static AGENT_SKILL: Message = Message {
    name: "AgentSkill",
    oneof: false,
    fields: &[
        f("id", "id", Kind::Str),
        f("name", "name", Kind::Str),
        f("description", "description", Kind::Str),
        f("tags", "tags", Kind::RepStr),
        f("examples", "examples", Kind::RepStr),
        f("inputModes", "input_modes", Kind::RepStr),
        f("outputModes", "output_modes", Kind::RepStr),
        f(
            "securityRequirements",
            "security_requirements",
            Kind::RepMsg(&SECURITY_REQUIREMENT),
        ),
    ],
};

static STRING_LIST: Message = Message {
    name: "StringList",
    oneof: false,
    fields: &[f("list", "list", Kind::RepStr)],
};

static SECURITY_REQUIREMENT: Message = Message {
    name: "SecurityRequirement",
    oneof: false,
    fields: &[f("schemes", "schemes", Kind::MapMsg(&STRING_LIST))],
};

static SECURITY_SCHEME: Message = Message {
    name: "SecurityScheme",
    oneof: true,
    fields: &[
        f(
            "apiKeySecurityScheme",
            "api_key_security_scheme",
            Kind::Msg(&API_KEY_SCHEME),
        ),
        f(
            "httpAuthSecurityScheme",
            "http_auth_security_scheme",
            Kind::Msg(&HTTP_AUTH_SCHEME),
        ),
        f(
            "oauth2SecurityScheme",
            "oauth2_security_scheme",
            Kind::Msg(&OAUTH2_SCHEME),
        ),
        f(
            "openIdConnectSecurityScheme",
            "open_id_connect_security_scheme",
            Kind::Msg(&OPEN_ID_CONNECT_SCHEME),
        ),
        f(
            "mtlsSecurityScheme",
            "mtls_security_scheme",
            Kind::Msg(&MUTUAL_TLS_SCHEME),
        ),
    ],
};

static API_KEY_SCHEME: Message = Message {
    name: "APIKeySecurityScheme",
    oneof: false,
    fields: &[
        f("description", "description", Kind::Str),
        f("location", "location", Kind::Str),
        f("name", "name", Kind::Str),
    ],
};

static HTTP_AUTH_SCHEME: Message = Message {
    name: "HTTPAuthSecurityScheme",
    oneof: false,
    fields: &[
        f("description", "description", Kind::Str),
        f("scheme", "scheme", Kind::Str),
        f("bearerFormat", "bearer_format", Kind::Str),
    ],
};

static OAUTH2_SCHEME: Message = Message {
    name: "OAuth2SecurityScheme",
    oneof: false,
    fields: &[
        f("description", "description", Kind::Str),
        f("flows", "flows", Kind::Msg(&OAUTH_FLOWS)),
        f("oauth2MetadataUrl", "oauth2_metadata_url", Kind::Str),
    ],
};

static OPEN_ID_CONNECT_SCHEME: Message = Message {
    name: "OpenIdConnectSecurityScheme",
    oneof: false,
    fields: &[
        f("description", "description", Kind::Str),
        f("openIdConnectUrl", "open_id_connect_url", Kind::Str),
    ],
};

static MUTUAL_TLS_SCHEME: Message = Message {
    name: "MutualTlsSecurityScheme",
    oneof: false,
    fields: &[f("description", "description", Kind::Str)],
};

static OAUTH_FLOWS: Message = Message {
    name: "OAuthFlows",
    oneof: true,
    fields: &[
        f(
            "authorizationCode",
            "authorization_code",
            Kind::Msg(&AUTHORIZATION_CODE_FLOW),
        ),
        f(
            "clientCredentials",
            "client_credentials",
            Kind::Msg(&CLIENT_CREDENTIALS_FLOW),
        ),
        f("implicit", "implicit", Kind::Msg(&IMPLICIT_FLOW)),
        f("password", "password", Kind::Msg(&PASSWORD_FLOW)),
        f("deviceCode", "device_code", Kind::Msg(&DEVICE_CODE_FLOW)),
    ],
};

static AUTHORIZATION_CODE_FLOW: Message = Message {
    name: "AuthorizationCodeOAuthFlow",
    oneof: false,
    fields: &[
        f("authorizationUrl", "authorization_url", Kind::Str),
        f("tokenUrl", "token_url", Kind::Str),
        f("refreshUrl", "refresh_url", Kind::Str),
        f("scopes", "scopes", Kind::MapStr),
        f("pkceRequired", "pkce_required", Kind::Bool),
    ],
};

static CLIENT_CREDENTIALS_FLOW: Message = Message {
    name: "ClientCredentialsOAuthFlow",
    oneof: false,
    fields: &[
        f("tokenUrl", "token_url", Kind::Str),
        f("refreshUrl", "refresh_url", Kind::Str),
        f("scopes", "scopes", Kind::MapStr),
    ],
};

static IMPLICIT_FLOW: Message = Message {
    name: "ImplicitOAuthFlow",
    oneof: false,
    fields: &[
        f("authorizationUrl", "authorization_url", Kind::Str),
        f("refreshUrl", "refresh_url", Kind::Str),
        f("scopes", "scopes", Kind::MapStr),
    ],
};

static PASSWORD_FLOW: Message = Message {
    name: "PasswordOAuthFlow",
    oneof: false,
    fields: &[
        f("tokenUrl", "token_url", Kind::Str),
        f("refreshUrl", "refresh_url", Kind::Str),
        f("scopes", "scopes", Kind::MapStr),
    ],
};

static DEVICE_CODE_FLOW: Message = Message {
    name: "DeviceCodeOAuthFlow",
    oneof: false,
    fields: &[
        f(
            "deviceAuthorizationUrl",
            "device_authorization_url",
            Kind::Str,
        ),
        f("tokenUrl", "token_url", Kind::Str),
        f("refreshUrl", "refresh_url", Kind::Str),
        f("scopes", "scopes", Kind::MapStr),
    ],
};
