//! The `[card]` table: where the card comes from, how it is signed, and how the agents' own
//! signature is checked.

use std::time::Duration;

use serde_json::Value;

use super::file;
use super::secret;
use super::{Ctx, PolicyError};
use crate::card::keys::{SigningAlg, SigningKey};
use crate::card::settings::{CardPolicy, CardSource, Jku};
use crate::card::verify::VerifyKeys;

impl Ctx<'_> {
    /// `upstreams` are the names of the policy's agents (`card.upstream` must be one).
    pub(super) fn card(
        &self,
        c: file::CardSection,
        mode: super::LoadMode,
        upstreams: &[&str],
    ) -> Result<CardPolicy, PolicyError> {
        let upstream = match &c.upstream {
            None => None,
            Some(_) if c.source.as_ref().is_some_and(|s| s.get_ref() == "static") => {
                return self.err(
                    "card.upstream",
                    None,
                    "only meaningful with source = \"upstream\"".into(),
                )
            }
            Some(u) if !upstreams.contains(&u.get_ref().as_str()) => {
                return self.spanned_err(
                    "card.upstream",
                    u,
                    format!("names no upstream (one of {upstreams:?})"),
                )
            }
            Some(u) => Some(u.get_ref().clone()),
        };
        let source = match c.source.as_ref().map(|s| s.get_ref().as_str()) {
            None | Some("upstream") => {
                if c.static_card.is_some() {
                    return self.err(
                        "card.static",
                        None,
                        "only meaningful with source = \"static\"".into(),
                    );
                }
                CardSource::Upstream
            }
            Some("static") => match &c.static_card {
                Some(t) => match serde_json::to_value(t.get_ref()) {
                    Ok(v) => {
                        // What the edge will publish must be an A2A 1.0 AgentCard, checked
                        // in JSON names as the edge publishes it (a member named both ways is
                        // refused); the edge writes `supportedInterfaces` itself.
                        let mut probe = v.clone();
                        if let Err(e) = crate::card::to_json_names(&mut probe) {
                            return self.spanned_err(
                                "card.static",
                                t,
                                format!("not an A2A 1.0 AgentCard: {e}"),
                            );
                        }
                        // Only what the schema knows is served (and signed): a member it does
                        // not know would be dropped unseen, so it is refused here, as an
                        // unknown key of the policy is.
                        let unserved = crate::card::unserved_members(&probe);
                        if !unserved.is_empty() {
                            return self.spanned_err(
                                "card.static",
                                t,
                                format!(
                                    "not members of an A2A 1.0 AgentCard (the edge would not \
                                     serve them): {}",
                                    unserved.join(", ")
                                ),
                            );
                        }
                        if let Some(m) = probe.as_object_mut() {
                            m.entry("supportedInterfaces").or_insert_with(|| {
                                serde_json::json!([{"url": "https://edge.invalid/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
                            });
                        }
                        crate::card::schema::repair(&mut probe);
                        if let Err(e) = crate::card::schema::check(&probe) {
                            return self.spanned_err(
                                "card.static",
                                t,
                                format!("not an A2A 1.0 AgentCard: {e}"),
                            );
                        }
                        CardSource::Static(v)
                    }
                    Err(e) => {
                        return self.spanned_err("card.static", t, format!("not a card: {e}"))
                    }
                },
                None => {
                    return self.err(
                        "card.static",
                        None,
                        "required with source = \"static\"".into(),
                    )
                }
            },
            Some(_) => {
                if let Some(s) = &c.source {
                    return self.spanned_err(
                        "card.source",
                        s,
                        "must be \"upstream\" or \"static\"",
                    );
                }
                CardSource::Upstream
            }
        };
        let mut signing_keys = Vec::new();
        for (i, k) in c.signing_keys.iter().enumerate() {
            let key = |n: &str| format!("card.signing_keys[{i}].{n}");
            let kid = k.kid.get_ref();
            if kid.is_empty() || kid.len() > 128 || !kid.bytes().all(|b| b.is_ascii_graphic()) {
                return self.spanned_err(
                    &key("kid"),
                    &k.kid,
                    "must be 1-128 printable ASCII characters",
                );
            }
            if signing_keys
                .iter()
                .any(|s: &std::sync::Arc<SigningKey>| s.kid == *kid)
            {
                return self.spanned_err(&key("kid"), &k.kid, "duplicate kid");
            }
            let Some(alg) = SigningAlg::parse(k.alg.get_ref()) else {
                return self.spanned_err(
                    &key("alg"),
                    &k.alg,
                    "must be HS256, RS256, ES256 or EdDSA",
                );
            };
            let made = match (alg, &k.secret_env, &k.private_key_file) {
                (SigningAlg::HS256, Some(var), None) => {
                    let secret = secret::from_env(var.get_ref())
                        .or_else(|m| self.spanned_err(&key("secret_env"), var, m))?;
                    if secret.len() < 32 {
                        return self.spanned_err(
                            &key("secret_env"),
                            var,
                            "an HS256 secret must have at least 32 bytes",
                        );
                    }
                    SigningKey::hs256(kid, secret.as_bytes())
                }
                (SigningAlg::HS256, _, _) => {
                    return self.spanned_err(
                        &key("alg"),
                        &k.alg,
                        "HS256 takes secret_env (and no private_key_file)",
                    )
                }
                (_, None, Some(path)) => {
                    let missing = !path.get_ref().exists();
                    if missing && k.generate_if_missing {
                        let pem = generate_key(alg).or_else(|m| {
                            self.spanned_err(&key("generate_if_missing"), &k.alg, m)
                        })?;
                        // `check` has no side effects: it signs with a throwaway key.
                        if mode == super::LoadMode::Serve {
                            secret::write_private(path.get_ref(), pem.as_bytes())
                                .or_else(|m| self.spanned_err(&key("private_key_file"), path, m))?;
                        }
                        SigningKey::from_private_pem(kid, alg, pem.as_bytes())
                    } else {
                        let pem = crate::crypto::read_private_key(path.get_ref())
                            .or_else(|m| self.spanned_err(&key("private_key_file"), path, m))?;
                        SigningKey::from_private_pem(kid, alg, &pem)
                    }
                }
                (_, _, _) => {
                    return self.spanned_err(
                        &key("alg"),
                        &k.alg,
                        "RS256, ES256 and EdDSA take private_key_file (and no secret_env)",
                    )
                }
            };
            let made = made
                .map_err(|e| e.0)
                .or_else(|m| self.spanned_err(&key("kid"), &k.kid, m))?;
            signing_keys.push(std::sync::Arc::new(made));
        }
        let active = match &c.active_kid {
            Some(a) => match signing_keys.iter().position(|k| k.kid == *a.get_ref()) {
                Some(i) => Some(i),
                None => {
                    return self.spanned_err(
                        "card.active_kid",
                        a,
                        "names no [[card.signing_keys]] entry",
                    )
                }
            },
            None if signing_keys.len() == 1 => Some(0),
            None if signing_keys.is_empty() => None,
            None => {
                return self.err(
                    "card.active_kid",
                    None,
                    "required when several signing keys are configured".into(),
                )
            }
        };
        let jku = match c.jku.as_ref().map(|u| (u, u.get_ref())) {
            None | Some((_, file::JkuSetting::Switch(true))) => Jku::Auto,
            Some((_, file::JkuSetting::Switch(false))) => Jku::Off,
            Some((u, file::JkuSetting::Url(raw))) => match url::Url::parse(raw) {
                Ok(url) if url.scheme() == "https" => Jku::Url(url.to_string()),
                _ => {
                    return self.spanned_err(
                        "card.jku",
                        u,
                        "must be an https:// URL, true (the edge's JWKS) or false",
                    )
                }
            },
        };
        let upstream_keys = match &c.upstream_keys {
            None => None,
            Some(u) => {
                let mut keys = VerifyKeys::new();
                for (kid, var) in &u.secrets_env {
                    let s = secret::from_env(var)
                        .or_else(|m| self.err("card.upstream_keys.secrets_env", None, m))?;
                    keys.add_secret(kid, s.as_bytes());
                }
                if let Some(f) = &u.jwks_file {
                    let text = std::fs::read_to_string(f)
                        .map_err(|e| format!("cannot read {}: {e}", f.display()))
                        .or_else(|m| self.err("card.upstream_keys.jwks_file", None, m))?;
                    let jwks: Value = serde_json::from_str(&text)
                        .map_err(|e| format!("{} is not JSON: {e}", f.display()))
                        .or_else(|m| self.err("card.upstream_keys.jwks_file", None, m))?;
                    keys.add_jwks(&jwks)
                        .map_err(|e| e.0)
                        .or_else(|m| self.err("card.upstream_keys.jwks_file", None, m))?;
                }
                if keys.is_empty() {
                    return self.err("card.upstream_keys", None, "names no key".into());
                }
                Some(std::sync::Arc::new(keys))
            }
        };
        Ok(CardPolicy {
            source,
            upstream,
            refresh_interval: Duration::from_millis(
                c.refresh_interval_ms.unwrap_or(60_000).max(1_000),
            ),
            max_age_secs: c.max_age_secs.unwrap_or(60),
            signing_keys,
            active,
            jku,
            upstream_keys,
        })
    }
}

/// A fresh private key (PKCS#8 PEM) for a dev card key.
fn generate_key(alg: SigningAlg) -> Result<String, String> {
    let which = match alg {
        SigningAlg::ES256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        SigningAlg::EdDSA => &rcgen::PKCS_ED25519,
        _ => return Err("generate_if_missing makes ES256 and EdDSA keys only".into()),
    };
    rcgen::KeyPair::generate_for(which)
        .map(|k| k.serialize_pem())
        .map_err(|e| format!("cannot generate a key: {e}"))
}
