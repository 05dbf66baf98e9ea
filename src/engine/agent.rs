//! The echo agent: it answers every user message with `echo: <text>`, streamed in chunks, and
//! can be told what to do by directives written anywhere in the message text (the text parts,
//! joined with `\n`). Directives are removed from the echoed text.
//!
//! | directive      | effect |
//! |----------------|--------|
//! | `[[slow:MS]]`  | wait MS milliseconds before each chunk (capped at 60000) |
//! | `[[chunks:N]]` | stream the answer in N chunks (clamped to 1..=100; default 3). The text is split on character boundaries as evenly as possible, so a text shorter than N gives some empty chunks |
//! | `[[fail]]`     | end in `TASK_STATE_FAILED` with the message "Echo agent failed as asked." |
//! | `[[complete]]` | end in `TASK_STATE_COMPLETED` with the echo |
//! | `[[input]]`    | end in `TASK_STATE_INPUT_REQUIRED` with the question "What next?" |
//! | `[[wait]]`     | after the chunks, stay `TASK_STATE_WORKING` until canceled (at most 10 minutes, then end as usual) |
//! | `[[message]]`  | answer with a bare agent Message (no task): SendMessage gives `{"message":…}`, a stream gives exactly one `{"message":…}` event |
//!
//! Without an ending directive a turn ends in `TASK_STATE_INPUT_REQUIRED` with the echo as the
//! agent message, as iac-code ends every normal turn. If several ending directives are given,
//! `[[fail]]` beats `[[complete]]`, which beats `[[input]]`. A `[[...]]` that is not one of these
//! (or has a malformed number) stays in the text as it is.
//!
//! A turn goes SUBMITTED → WORKING (status update) → one artifact named `echo` in N chunks
//! (artifact updates; `append` from the second chunk on, `lastChunk` on the last) → the final
//! status update with the agent message.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::store::{Store, Turn};
use super::task::TaskState;

/// Upper bound of `[[slow:MS]]`.
pub(crate) const MAX_SLOW_MS: u64 = 60_000;
/// Upper bound of `[[chunks:N]]`.
pub(crate) const MAX_CHUNKS: usize = 100;
/// Chunks without `[[chunks:N]]`.
pub(crate) const DEFAULT_CHUNKS: usize = 3;
/// The longest directive (between `[[` and `]]`): a `]]` farther on closes none, so a
/// text is read in one pass (a search to the end from every `[[` was quadratic).
const MAX_DIRECTIVE: usize = 64;
/// How long `[[wait]]` waits at most.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(600);

pub(crate) const FAIL_TEXT: &str = "Echo agent failed as asked.";
pub(crate) const QUESTION_TEXT: &str = "What next?";

/// How a turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// INPUT_REQUIRED with the echo (the default, as iac-code).
    Echo,
    /// COMPLETED with the echo.
    Complete,
    /// FAILED with [`FAIL_TEXT`].
    Fail,
    /// INPUT_REQUIRED with [`QUESTION_TEXT`].
    Ask,
}

/// What the agent will do for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub slow: Duration,
    pub chunks: usize,
    pub ending: Ending,
    pub wait: bool,
    pub message_only: bool,
    /// The full answer, `echo: <text without directives>`.
    pub echo: String,
}

/// The text of a message: its text parts joined with `\n`.
pub(crate) fn message_text(message: &Map<String, Value>) -> String {
    message
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Reads the directives of a message text.
pub(crate) fn plan(text: &str) -> Plan {
    let mut p = Plan {
        slow: Duration::ZERO,
        chunks: DEFAULT_CHUNKS,
        ending: Ending::Echo,
        wait: false,
        message_only: false,
        echo: String::new(),
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let near = &after.as_bytes()[..after.len().min(MAX_DIRECTIVE + 2)];
        // `]` is ASCII: where its pair begins is a char boundary.
        match near.windows(2).position(|w| w == b"]]") {
            Some(end) if apply(&after[..end], &mut p) => rest = &after[end + 2..],
            _ => {
                out.push('[');
                rest = &rest[start + 1..];
            }
        }
    }
    out.push_str(rest);
    p.echo = format!("echo: {}", out.trim()).trim_end().to_string();
    p
}

/// Applies one directive (the text between `[[` and `]]`); false if it is not one.
fn apply(directive: &str, p: &mut Plan) -> bool {
    let (name, arg) = match directive.split_once(':') {
        Some((n, a)) => (n.trim(), Some(a.trim())),
        None => (directive.trim(), None),
    };
    let number = || arg.filter(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()));
    match (name, arg) {
        ("slow", Some(_)) => {
            let Some(ms) = number() else { return false };
            // Too many digits for u64 is still "very slow".
            let ms = ms.parse::<u64>().unwrap_or(MAX_SLOW_MS).min(MAX_SLOW_MS);
            p.slow = Duration::from_millis(ms);
        }
        ("chunks", Some(_)) => {
            let Some(n) = number() else { return false };
            let n = n.parse::<usize>().unwrap_or(MAX_CHUNKS);
            p.chunks = n.clamp(1, MAX_CHUNKS);
        }
        ("fail", None) => p.ending = Ending::Fail,
        ("complete", None) => {
            if p.ending != Ending::Fail {
                p.ending = Ending::Complete;
            }
        }
        ("input", None) => {
            if p.ending == Ending::Echo {
                p.ending = Ending::Ask;
            }
        }
        ("wait", None) => p.wait = true,
        ("message", None) => p.message_only = true,
        _ => return false,
    }
    true
}

/// Splits `s` into exactly `n` pieces on character boundaries, as even as possible.
pub(crate) fn split_chunks(s: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    let chars: Vec<char> = s.chars().collect();
    let base = chars.len() / n;
    let extra = chars.len() % n;
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        out.push(chars[at..at + len].iter().collect());
        at += len;
    }
    out
}

/// Sleeps for `d` unless the turn is stopped first; false when stopped.
async fn pause(stop: &mut watch::Receiver<()>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        // Nothing is ever sent: this resolves when the turn is dropped (canceled).
        _ = stop.changed() => false,
    }
}

/// Runs one turn to its end (or until it is canceled). Spawned once per turn.
pub(crate) async fn run(store: Arc<Store>, mut turn: Turn, plan: Plan) {
    if store.set_working(&turn).is_err() {
        return;
    }
    let artifact_id = super::ids::uuid_v4();
    let pieces = split_chunks(&plan.echo, plan.chunks);
    let n = pieces.len();
    for (i, piece) in pieces.into_iter().enumerate() {
        if !plan.slow.is_zero() && !pause(&mut turn.stop, plan.slow).await {
            return;
        }
        let artifact = json!({
            "artifactId": artifact_id,
            "name": "echo",
            "parts": [{ "text": piece }],
        });
        if store
            .artifact_chunk(&turn, &artifact, i > 0, i + 1 == n)
            .is_err()
        {
            return;
        }
    }
    if plan.wait && !pause(&mut turn.stop, MAX_WAIT).await {
        return;
    }
    let (state, text) = match plan.ending {
        Ending::Echo => (TaskState::InputRequired, plan.echo.as_str()),
        Ending::Complete => (TaskState::Completed, plan.echo.as_str()),
        Ending::Fail => (TaskState::Failed, FAIL_TEXT),
        Ending::Ask => (TaskState::InputRequired, QUESTION_TEXT),
    };
    // A turn canceled meanwhile has its final state already.
    let _ = store.finish(&turn, state, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text of brackets that close no directive is read in one pass (each `[[` looks for
    /// its `]]` only as far as a directive may reach): 1 MiB of them, and 1 MiB of `[[a`
    /// closed at the very end, come back whole at once.
    #[test]
    fn unclosed_brackets_are_read_in_one_pass() {
        for text in [
            "[".repeat(1 << 20),
            format!("{}]]", "[[a".repeat(350_000)),
            format!("[[{}]] [[slow:5]]", "é".repeat(40)),
        ] {
            let p = plan(&text);
            assert!(p.echo.len() >= text.len() / 2, "{}", p.echo.len());
        }
        assert_eq!(
            plan(&format!("[[{}]]", "x".repeat(MAX_DIRECTIVE + 1))).slow,
            Duration::ZERO
        );
        assert_eq!(plan("[[slow:7]]").slow, Duration::from_millis(7));
    }

    #[test]
    fn directives_table() {
        // (text, slow ms, chunks, ending, wait, message_only, echo)
        let cases: &[(&str, u64, usize, Ending, bool, bool, &str)] = &[
            ("hello", 0, 3, Ending::Echo, false, false, "echo: hello"),
            (
                "[[slow:25]] hi",
                25,
                3,
                Ending::Echo,
                false,
                false,
                "echo: hi",
            ),
            (
                "a [[slow:999999]]",
                60_000,
                3,
                Ending::Echo,
                false,
                false,
                "echo: a",
            ),
            (
                "a [[slow:99999999999999999999999]]",
                60_000,
                3,
                Ending::Echo,
                false,
                false,
                "echo: a",
            ),
            ("[[chunks:7]]x", 0, 7, Ending::Echo, false, false, "echo: x"),
            ("[[chunks:0]]x", 0, 1, Ending::Echo, false, false, "echo: x"),
            (
                "[[chunks:500]]x",
                0,
                100,
                Ending::Echo,
                false,
                false,
                "echo: x",
            ),
            ("[[fail]] x", 0, 3, Ending::Fail, false, false, "echo: x"),
            (
                "[[complete]] x",
                0,
                3,
                Ending::Complete,
                false,
                false,
                "echo: x",
            ),
            ("[[input]] x", 0, 3, Ending::Ask, false, false, "echo: x"),
            (
                "[[input]][[complete]][[fail]]",
                0,
                3,
                Ending::Fail,
                false,
                false,
                "echo:",
            ),
            (
                "[[fail]][[complete]]",
                0,
                3,
                Ending::Fail,
                false,
                false,
                "echo:",
            ),
            ("[[wait]] x", 0, 3, Ending::Echo, true, false, "echo: x"),
            ("[[message]] x", 0, 3, Ending::Echo, false, true, "echo: x"),
            (
                " [[ slow : 5 ]] x",
                5,
                3,
                Ending::Echo,
                false,
                false,
                "echo: x",
            ),
            // not directives: kept as text
            (
                "[[slow:abc]] x",
                0,
                3,
                Ending::Echo,
                false,
                false,
                "echo: [[slow:abc]] x",
            ),
            (
                "[[slow]] x",
                0,
                3,
                Ending::Echo,
                false,
                false,
                "echo: [[slow]] x",
            ),
            (
                "[[fail:1]] x",
                0,
                3,
                Ending::Echo,
                false,
                false,
                "echo: [[fail:1]] x",
            ),
            (
                "[[nope]] [[fail",
                0,
                3,
                Ending::Echo,
                false,
                false,
                "echo: [[nope]] [[fail",
            ),
            ("[[[[fail]]", 0, 3, Ending::Fail, false, false, "echo: [["),
            (
                "é[[chunks:2]]ü",
                0,
                2,
                Ending::Echo,
                false,
                false,
                "echo: éü",
            ),
        ];
        for (text, slow, chunks, ending, wait, message_only, echo) in cases {
            let p = plan(text);
            assert_eq!(p.slow, Duration::from_millis(*slow), "{text}");
            assert_eq!(p.chunks, *chunks, "{text}");
            assert_eq!(p.ending, *ending, "{text}");
            assert_eq!(p.wait, *wait, "{text}");
            assert_eq!(p.message_only, *message_only, "{text}");
            assert_eq!(p.echo, *echo, "{text}");
        }
    }

    #[test]
    fn chunks_cover_the_text_exactly() {
        for (s, n) in [
            ("echo: hello", 3),
            ("ab", 5),
            ("", 1),
            ("ééé", 2),
            ("x", 100),
        ] {
            let parts = split_chunks(s, n);
            assert_eq!(parts.len(), n);
            assert_eq!(parts.concat(), s);
            let lens: Vec<usize> = parts.iter().map(|p| p.chars().count()).collect();
            let (min, max) = (lens.iter().min(), lens.iter().max());
            assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{lens:?}");
        }
    }

    #[test]
    fn text_of_parts() {
        let m = json!({"parts":[{"text":"a"},{"data":{"k":1}},{"text":"b"}]});
        let Value::Object(m) = m else { unreachable!() };
        assert_eq!(message_text(&m), "a\nb");
    }
}
