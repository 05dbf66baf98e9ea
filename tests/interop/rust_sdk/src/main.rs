//! `a2a-edge-rust-sdk-check URL CA_PEM`: resolves the edge's Agent Card with the official
//! Rust SDK (`a2a-client-lf`), trusting the edge's dev CA, and prints what it read. The SDK
//! refuses a whole card for one missing required field, so resolving is the check.
#![forbid(unsafe_code)]

use a2a_client::agent_card::AgentCardResolver;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(ca)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: a2a-edge-rust-sdk-check URL CA_PEM");
        return std::process::ExitCode::from(2);
    };
    let pem = match std::fs::read(ca) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("FAIL rust-sdk-card: cannot read {ca}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let client = match a2a_client::default_reqwest_client(Some(&pem)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rust-sdk-card: client: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match AgentCardResolver::new(Some(client)).resolve(url).await {
        Ok(card) => {
            let interfaces: Vec<String> = card
                .supported_interfaces
                .iter()
                .map(|i| format!("{} {}", i.protocol_binding, i.url))
                .collect();
            println!(
                "PASS rust-sdk-card: a2a-client-lf 0.2.9 resolved {:?} version {:?}, {} skill(s), interfaces [{}]",
                card.name,
                card.version,
                card.skills.len(),
                interfaces.join(", ")
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            println!("FAIL rust-sdk-card: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
