//! Failover and switchover of a real PostgreSQL cluster under Patroni, with
//! agents writing through a multi-host URL (issue 29).
//!
//! Runs against the cluster that `scripts/pg-ha-cluster` starts (one etcd,
//! three PostgreSQL nodes, synchronous replication), named by
//! `DSTORE_TEST_POSTGRES_HA_URL` and `DSTORE_TEST_PATRONI_CONFIGS`:
//!
//! ```sh
//! scripts/pg-ha-cluster cargo test --test postgres_ha
//! ```
//!
//! Without them it says on stdout that it did not run. Each case starts
//! eight writer processes (this test binary again, as writers) that record
//! decisions through the URL, then kills the leader's postmaster (SIGKILL)
//! or asks Patroni for a switchover, and checks afterwards: every decision
//! whose insert returned success is stored, `check` finds nothing wrong
//! (no gap or fork in any hash chain), and every writer resumed within 30
//! seconds. It prints how long the writes paused.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use decision_store::{Decision, DecisionId, DecisionType, Error, PlanId, Store};

const WRITERS: usize = 8;
/// How long a writer may stay without a successful write after the event.
const RESUME_BOUND: Duration = Duration::from_secs(30);

/// A writer process: records decisions of a plan of its own until the stop
/// file appears, one line on stdout for each insert that returned success
/// (`ok ID MILLIS`, the milliseconds since the writer started).
fn writer(url: &str, stop: &Path) {
    let started = Instant::now();
    let plan = PlanId::generate();
    let mut store = loop {
        match Store::connect(url) {
            Ok(s) => break s,
            Err(e) if started.elapsed() < RESUME_BOUND => {
                eprintln!("writer: connect: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("writer: cannot connect: {e}"),
        }
    };
    let mut out = std::io::stdout().lock();
    let mut parent: Option<DecisionId> = None;
    let mut sequence = 0u32;
    while !stop.exists() {
        let mut b = Decision::builder(
            plan,
            if parent.is_none() { DecisionType::PromptDefinition } else { DecisionType::ToolInvocation },
            sequence,
        )
        .chosen_option(format!("step {sequence}"))
        .confidence_score(Some(0.5));
        if let Some(p) = parent {
            b = b.parent(p);
        }
        let d = b.build().expect("a valid decision");
        // Until the store says whether `d` is stored: a write it reports
        // as not stored (an error other than OutcomeUnknown) is tried again
        // as it is, so a duplicate would show a write it stored after all.
        let mut lost = false;
        loop {
            match store.insert(&d) {
                Ok(()) => break,
                Err(Error::OutcomeUnknown { .. }) => {
                    writeln!(out, "unknown").unwrap();
                    // The library could not tell: ask, as its message says, until the server answers.
                    let known = loop {
                        match store.get(d.decision_id()) {
                            Ok(found) => break found.is_some(),
                            Err(_) => std::thread::sleep(Duration::from_millis(50)),
                        }
                    };
                    if known {
                        break;
                    }
                }
                Err(Error::DuplicateDecision(id)) if lost => {
                    panic!("writer: {id} was reported not stored, but it was")
                }
                Err(e) => {
                    lost = true;
                    writeln!(out, "failed {}", matches!(e, Error::ConnectionLost { .. })).unwrap();
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        writeln!(out, "ok {} {}", d.decision_id(), started.elapsed().as_millis()).unwrap();
        out.flush().unwrap();
        parent = Some(d.decision_id());
        sequence += 1;
    }
}

/// One writer process and what it has reported so far.
struct Writer {
    child: Child,
    /// (id, when in the test's time) of each success.
    done: Arc<Mutex<Vec<(DecisionId, Instant)>>>,
    /// Calls that failed (of them, with the connection lost mid-call), and
    /// calls whose outcome the library could not tell.
    failed: Arc<Mutex<(usize, usize, usize)>>,
}

fn start_writers(url: &str, stop: &Path) -> Vec<Writer> {
    (0..WRITERS)
        .map(|_| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env("DSTORE_HA_WRITER", url)
                .env("DSTORE_HA_STOP", stop)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("a writer starts");
            let done = Arc::new(Mutex::new(Vec::new()));
            let failed = Arc::new(Mutex::new((0, 0, 0)));
            let (lines, sink, counts) = (child.stdout.take().unwrap(), done.clone(), failed.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(lines).lines().map_while(Result::ok) {
                    let mut words = line.split(' ');
                    match words.next() {
                        Some("ok") => {
                            let id = DecisionId::parse(words.next().unwrap()).unwrap();
                            sink.lock().unwrap().push((id, Instant::now()));
                        }
                        Some("failed") => {
                            let mut c = counts.lock().unwrap();
                            c.0 += 1;
                            c.1 += usize::from(words.next() == Some("true"));
                        }
                        Some("unknown") => counts.lock().unwrap().2 += 1,
                        _ => {}
                    }
                }
            });
            Writer { child, done, failed }
        })
        .collect()
}

fn successes(writers: &[Writer]) -> Vec<usize> {
    writers.iter().map(|w| w.done.lock().unwrap().len()).collect()
}

/// Polls `f` every 100 ms until it holds, for `bound` at most.
fn wait_for(what: &str, bound: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < bound, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// The members of the cluster as `patronictl list -f json` shows them.
fn members(config: &Path) -> Vec<serde_json::Value> {
    let patronictl = std::env::var("PATRONICTL").unwrap_or_else(|_| "patronictl".into());
    let out = Command::new(patronictl).arg("-c").arg(config).args(["list", "-f", "json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

fn member_with(config: &Path, role: &str) -> Option<String> {
    members(config)
        .iter()
        .find(|m| m["Role"] == role && m["State"] != "stopped")
        .map(|m| m["Member"].as_str().unwrap().to_owned())
}

/// Leader, sync standby and replica all running on one timeline.
fn healthy(config: &Path) -> bool {
    let m = members(config);
    let running = |role: &str| {
        m.iter().any(|x| x["Role"] == role && matches!(x["State"].as_str(), Some("running" | "streaming")))
    };
    m.len() == 3 && running("Leader") && running("Sync Standby") && running("Replica")
}

enum Event {
    /// SIGKILL of the leader's postmaster.
    KillPrimary,
    /// `patronictl switchover` to the synchronous standby.
    Switchover,
}

fn case(url: &str, config: &Path, event: Event, name: &str) {
    wait_for("the cluster is healthy", Duration::from_secs(90), || healthy(config));
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let writers = start_writers(url, &stop);
    wait_for("every writer has written", Duration::from_secs(30), || successes(&writers).iter().all(|&n| n >= 20));
    let leader = member_with(config, "Leader").expect("a leader");
    let at = Instant::now();
    match event {
        Event::KillPrimary => {
            let data: PathBuf = config.parent().unwrap().parent().unwrap().join(&leader).join("data");
            let pid = std::fs::read_to_string(data.join("postmaster.pid")).unwrap();
            let pid = pid.lines().next().unwrap().trim();
            assert!(Command::new("kill").args(["-9", pid]).status().unwrap().success());
        }
        Event::Switchover => {
            let candidate = member_with(config, "Sync Standby").expect("a synchronous standby");
            let patronictl = std::env::var("PATRONICTL").unwrap_or_else(|_| "patronictl".into());
            let status = Command::new(patronictl)
                .arg("-c")
                .arg(config)
                .args(["switchover", "--leader", &leader, "--candidate", &candidate, "--force"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
    // Every writer writes again after the event.
    wait_for("every writer resumed", RESUME_BOUND, || {
        writers.iter().all(|w| w.done.lock().unwrap().iter().any(|(_, t)| *t > at + Duration::from_millis(500)))
    });
    assert_ne!(member_with(config, "Leader").as_deref(), Some(leader.as_str()), "the leader changed");
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(&stop, b"").unwrap();
    let mut writers = writers;
    for w in &mut writers {
        assert!(w.child.wait().unwrap().success(), "a writer failed");
    }
    // The pause: for each writer, the longest gap between two successes around the event.
    let mut pauses: Vec<Duration> = writers
        .iter()
        .map(|w| {
            let done = w.done.lock().unwrap();
            done.windows(2)
                .filter(|p| p[1].1 > at)
                .map(|p| p[1].1.saturating_duration_since(p[0].1.max(at)))
                .max()
                .unwrap_or_default()
        })
        .collect();
    pauses.sort();
    let (failed, lost, unknown) = writers.iter().fold((0, 0, 0), |a, w| {
        let c = *w.failed.lock().unwrap();
        (a.0 + c.0, a.1 + c.1, a.2 + c.2)
    });
    let store = Store::connect_read_only(url).expect("the new primary answers");
    let mut stored = 0;
    for w in &writers {
        for (id, _) in w.done.lock().unwrap().iter() {
            assert!(store.get(*id).unwrap().is_some(), "{id} was reported stored but is not");
            stored += 1;
        }
    }
    let problems = store.check().unwrap();
    assert!(problems.is_empty(), "check: {problems:?}");
    println!(
        "postgres_ha: {name}: {stored} decisions reported stored by {WRITERS} writers, all found; check clean; \
         writes paused {:.2} s (median writer) to {:.2} s (slowest); new leader {}; {failed} calls failed \
         meanwhile ({lost} with the connection lost mid-call), {unknown} with an outcome the library could not tell",
        pauses[WRITERS / 2].as_secs_f64(),
        pauses[WRITERS - 1].as_secs_f64(),
        member_with(config, "Leader").unwrap_or_default()
    );
}

fn main() {
    if let (Ok(url), Ok(stop)) = (std::env::var("DSTORE_HA_WRITER"), std::env::var("DSTORE_HA_STOP")) {
        writer(&url, Path::new(&stop));
        return;
    }
    let (Ok(url), Ok(configs)) =
        (std::env::var("DSTORE_TEST_POSTGRES_HA_URL"), std::env::var("DSTORE_TEST_PATRONI_CONFIGS"))
    else {
        println!(
            "postgres_ha: SKIPPED the failover and switchover tests: DSTORE_TEST_POSTGRES_HA_URL is not set \
             (run them with `scripts/pg-ha-cluster cargo test --test postgres_ha`)"
        );
        return;
    };
    let config = PathBuf::from(configs.split(':').next().unwrap());
    case(&url, &config, Event::KillPrimary, "failover (SIGKILL of the primary's postmaster)");
    case(&url, &config, Event::Switchover, "switchover (patronictl switchover)");
    replication_is_shown(&url, &config);
}

/// `dstore info` shows the primary's standbys, and a standby's lag.
fn replication_is_shown(url: &str, config: &Path) {
    wait_for("the cluster is healthy", Duration::from_secs(90), || healthy(config));
    // Patroni may list the old primary as running before it streams again.
    let reader = Store::connect_read_only(url).unwrap();
    wait_for("the primary streams to both standbys", Duration::from_secs(60), || {
        reader.replication().unwrap().is_some_and(|r| r.standbys.iter().filter(|s| s.state == "streaming").count() == 2)
    });
    let primary = reader.replication().unwrap().expect("a server");
    assert!(!primary.standby);
    assert_eq!(primary.standbys.len(), 2, "{primary:?}");
    assert!(primary.standbys.iter().any(|s| s.sync_state == "sync"), "{primary:?}");
    let on_standby = url.replace("target_session_attrs=read-write", "target_session_attrs=standby");
    let standby = Store::connect_read_only(&on_standby).unwrap().replication().unwrap().expect("a server");
    assert!(standby.standby && standby.lag_bytes.is_some(), "{standby:?}");
    let preferred = url.replace("target_session_attrs=read-write", "target_session_attrs=prefer-standby");
    let preferred = Store::connect_read_only(&preferred).unwrap().replication().unwrap().expect("a server");
    assert!(preferred.standby, "prefer-standby reads from a standby: {preferred:?}");
    let info = Command::new(env!("CARGO_BIN_EXE_dstore")).args(["info", url]).output().unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(text.contains("primary, 2 standbys") && text.contains("sync streaming, lag"), "{text}");
    let info = Command::new(env!("CARGO_BIN_EXE_dstore")).args(["info", &on_standby]).output().unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(text.contains("standby, lag"), "{text}");
    println!("postgres_ha: dstore info on the primary and on a standby shows the replication and its lag");
}
