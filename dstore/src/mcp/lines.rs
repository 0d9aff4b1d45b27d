//! stdio between the agent and the SDK, a line at a time: a line that is
//! not JSON gets JSON-RPC's parse error (-32700) instead of silence (the SDK
//! skips such lines), and every line the SDK writes reaches stdout whole,
//! so an error line never lands inside another message.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::http::BODY_LIMIT;
use tokio::sync::mpsc;

/// What the SDK reads (the agent's JSON lines), where it writes, and the
/// task that prints: it ends once the SDK has dropped its end and every
/// line is out.
pub fn stdio() -> (DuplexStream, DuplexStream, tokio::task::JoinHandle<()>) {
    let (sdk_in, mut feed) = tokio::io::duplex(1 << 16);
    let (sdk_out, printed) = tokio::io::duplex(1 << 16);
    let (errors, mut pending) = mpsc::unbounded_channel::<Vec<u8>>();

    // stdin -> the SDK, refusing lines that are not JSON.
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            // A message holds at most what an HTTP body may: the same limits on every transport.
            match (&mut stdin).take(BODY_LIMIT as u64 + 1).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let too_long = line.len() > BODY_LIMIT;
            if too_long {
                // The rest of the line goes unread into the void.
                let mut rest = Vec::new();
                if stdin.read_until(b'\n', &mut rest).await.is_err() {
                    break;
                }
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            let refused = if too_long {
                Some((-32600, format!("a message may hold at most {BODY_LIMIT} bytes")))
            } else {
                serde_json::from_slice::<serde::de::IgnoredAny>(text)
                    .err()
                    .map(|e| (-32700, format!("Parse error: {e}")))
            };
            if let Some((code, message)) = refused {
                let reply = serde_json::json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": code, "message": message}});
                let mut bytes = reply.to_string().into_bytes();
                bytes.push(b'\n');
                if errors.send(bytes).is_err() {
                    break;
                }
                continue;
            }
            if feed.write_all(text).await.is_err() || feed.write_all(b"\n").await.is_err() {
                break;
            }
        }
        // EOF reaches the SDK when `feed` drops: it finishes and ends.
    });

    // The SDK's lines and the parse errors -> stdout, whole lines only.
    let printer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut from_sdk = BufReader::new(printed);
        let mut line = Vec::new();
        loop {
            tokio::select! {
                read = from_sdk.read_until(b'\n', &mut line) => {
                    match read {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                                break;
                            }
                            line.clear();
                        }
                    }
                }
                Some(reply) = pending.recv() => {
                    if stdout.write_all(&reply).await.is_err() || stdout.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    (sdk_in, sdk_out, printer)
}
