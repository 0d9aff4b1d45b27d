//! Agents that call `record_decision` on a `dstore serve` as fast as it
//! answers: the load of the MCP benchmark (`benches/mcp.py`). Each agent
//! is a thread with one HTTP/1.1 connection kept alive; it records a plan's
//! root, then `CALLS` children of it, one request at a time. Prints the
//! calls per second of all agents together, then each call's latency in
//! microseconds, one a line.
//!
//! The client is lean (a request written as bytes, the answer checked for
//! a result that is not an error) so that on a two-core machine it leaves
//! the server the CPU that agents on other hosts would leave it.
//!
//! `cargo run --release --example mcp_load -- HOST:PORT AGENTS CALLS`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// One HTTP exchange on a kept-alive connection: the JSON-RPC answer's body.
fn post(stream: &mut BufReader<TcpStream>, host: &str, body: &str) -> Result<String, String> {
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.get_mut().write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut status = String::new();
    stream.read_line(&mut status).map_err(|e| e.to_string())?;
    let mut length = None;
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).map_err(|e| e.to_string())?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let mut answer = vec![0; length.ok_or("an answer without Content-Length")?];
    stream.read_exact(&mut answer).map_err(|e| e.to_string())?;
    let answer = String::from_utf8(answer).map_err(|e| e.to_string())?;
    if !status.starts_with("HTTP/1.1 20") {
        return Err(format!("{} {answer}", status.trim()));
    }
    Ok(answer)
}

/// A `tools/call` of `record_decision` with `args` (JSON object members).
fn record(id: u64, args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"record_decision","arguments":{{{args}}}}}}}"#
    )
}

/// The value of a string member `"key":"..."` in `json` (ids hold no escapes).
fn member<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let from = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    json[from..].split('"').next()
}

/// A connection, and the plan and root that an agent's calls extend.
fn begin(host: &str) -> Result<(BufReader<TcpStream>, String, String), String> {
    let mut stream = BufReader::new(TcpStream::connect(host).map_err(|e| e.to_string())?);
    stream.get_ref().set_nodelay(true).map_err(|e| e.to_string())?;
    let root = post(&mut stream, host, &record(1, r#""decision_type":"prompt_definition","chosen_option":"load""#))?;
    match (member(&root, "plan_id"), member(&root, "decision_id")) {
        (Some(plan), Some(parent)) => Ok((stream, plan.to_owned(), parent.to_owned())),
        _ => Err(format!("record_decision answered {root}")),
    }
}

fn agent(host: &str, calls: u64, start: &Barrier) -> Result<Vec<u64>, String> {
    let begun = begin(host);
    // Every agent passes the barrier, the failed ones too, so that main does not wait for ever.
    start.wait();
    let (mut stream, plan, parent) = begun?;
    let mut times = Vec::with_capacity(calls as usize);
    for i in 0..calls {
        let body = record(
            i + 2,
            &format!(
                r#""plan_id":"{plan}","parent_decision_id":"{parent}","decision_type":"strategy_choice","chosen_option":"option {i}","confidence_score":0.5,"rationale":"a rationale of a realistic length for a decision that an agent records""#
            ),
        );
        let t = Instant::now();
        let answer = post(&mut stream, host, &body)?;
        times.push(t.elapsed().as_micros() as u64);
        if !answer.contains("\"result\"") || answer.contains("\"isError\":true") {
            return Err(format!("record_decision answered {answer}"));
        }
    }
    Ok(times)
}

fn main() -> Result<(), String> {
    let usage = "usage: mcp_load HOST:PORT AGENTS CALLS";
    let mut args = std::env::args().skip(1);
    let host = args.next().ok_or(usage)?;
    let agents: usize = args.next().ok_or(usage)?.parse().map_err(|_| usage)?;
    let calls: u64 = args.next().ok_or(usage)?.parse().map_err(|_| usage)?;
    let start = Arc::new(Barrier::new(agents + 1));
    let threads: Vec<_> = (0..agents)
        .map(|_| {
            let (host, start) = (host.clone(), start.clone());
            std::thread::spawn(move || agent(&host, calls, &start))
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut times = Vec::new();
    for t in threads {
        times.extend(t.join().map_err(|_| "an agent panicked")??);
    }
    let rate = times.len() as f64 / began.elapsed().as_secs_f64();
    println!("{rate:.0}");
    for t in times {
        println!("{t}");
    }
    Ok(())
}
