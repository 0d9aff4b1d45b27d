//! The store of a server (`dstore mcp`, `dstore serve`, `dstore ui`): one
//! process owns it. Its writes go through one connection, one at a time,
//! on a thread of its own (so an agent's write never fails because another
//! agent is writing, and two agents appending to a plan get distinct
//! sequences: `Store::insert_next` reads the next inside the write); its
//! reads go through a pool of read-only connections and run side by side.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, PoisonError};

use decision_store::decision::Decision;
use decision_store::store::{Insertion, Store};
use decision_store::{Error, Result};

use super::errors::Failure;
use super::open::{open_read, open_write};

/// The store's connections: one writer, owned by a thread of its own, and
/// read-only ones for the reads.
pub struct Stores {
    target: PathBuf,
    writer: Option<Writer>,
    readers: Mutex<Vec<Store>>,
}

/// The writer thread's handle: the queue of writes it takes in turn.
struct Writer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A write for the writer thread.
enum Job {
    /// A decision to store; the insertions that wait together are stored
    /// in one transaction (`Store::insert_each`), each with its own answer.
    Insert(Box<Insertion>, mpsc::SyncSender<Result<Decision>>),
    /// Any other write, run alone (it answers through its own channel).
    Run(Box<dyn FnOnce(&mut Store) + Send>),
}

/// The most decisions stored in one transaction.
const GROUP: usize = 256;

impl Stores {
    /// Opens `target` (a path or a `postgres://` URL); a server that writes
    /// creates a missing store file, as `dstore init` does.
    ///
    /// # Errors
    /// The store's errors, or the environment's when the writer thread cannot start.
    pub fn open(target: &Path, read_only: bool) -> std::result::Result<Self, Failure> {
        let writer = if read_only { None } else { Some(Writer::start(open_write(target)?)?) };
        let reader = open_read(target)?;
        Ok(Stores { target: target.to_owned(), writer, readers: Mutex::new(vec![reader]) })
    }

    /// True when the store was opened for reading only.
    pub fn is_read_only(&self) -> bool {
        self.writer.is_none()
    }

    fn jobs(&self) -> Result<&mpsc::Sender<Job>> {
        let writer = self.writer.as_ref().ok_or(Error::ReadOnly)?;
        Ok(writer.jobs.as_ref().expect("the queue stays open while the server runs"))
    }

    /// Stores `insertion` after the writes queued before it, in one
    /// transaction with the other insertions that wait with it.
    pub fn insert(&self, insertion: Insertion) -> Result<Decision> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs()?.send(Job::Insert(Box::new(insertion), reply)).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }

    /// Runs `f` on the writer, after the writes queued before it.
    pub fn write<T: Send + 'static, E: From<Error> + Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> std::result::Result<T, E> + Send + 'static,
    ) -> std::result::Result<T, E> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Run(Box::new(move |store| {
            let _ = reply.send(f(store));
        }));
        self.jobs()?.send(job).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }

    /// Runs `f` on a read-only connection of the pool (opening one when all are busy).
    pub fn read<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let idle = self.readers.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let store = match idle {
            Some(store) => store,
            None => open_read(&self.target)?,
        };
        let out = f(&store);
        self.readers.lock().unwrap_or_else(PoisonError::into_inner).push(store);
        out
    }
}

/// The answer to a write whose job the writer dropped: it panicked.
fn stopped() -> Error {
    Error::storage("internal error: the write failed and was rolled back")
}

impl Writer {
    fn start(store: Store) -> std::result::Result<Writer, Failure> {
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("dstore-writer".into())
            .spawn(move || write_in_turn(store, &queue))
            .map_err(|e| Failure::environment(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { jobs: Some(jobs), thread: Some(thread) })
    }
}

impl Drop for Writer {
    /// Closes the queue, lets the writer finish what was queued, and waits for it.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer thread: takes the queued writes in turn until the queue
/// closes. Insertions that wait together go in one transaction. A panic
/// inside a write rolls its transaction back (dropping it does), drops
/// the answers of its job (their callers report it) and leaves the
/// thread serving.
fn write_in_turn(mut store: Store, queue: &mpsc::Receiver<Job>) {
    let mut next = None;
    while let Some(job) = next.take().or_else(|| queue.recv().ok()) {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match job {
            Job::Run(f) => f(&mut store),
            Job::Insert(insertion, reply) => {
                let mut items = vec![*insertion];
                let mut replies = vec![reply];
                while items.len() < GROUP {
                    match queue.try_recv() {
                        Ok(Job::Insert(insertion, reply)) => {
                            items.push(*insertion);
                            replies.push(reply);
                        }
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                match store.insert_each(&items) {
                    Ok(outcomes) => {
                        for (reply, outcome) in replies.into_iter().zip(outcomes) {
                            let _ = reply.send(outcome);
                        }
                    }
                    Err(e) => {
                        // The group's transaction failed as a whole: each caller hears why.
                        for reply in replies {
                            let _ = reply.send(Err(again(&e)));
                        }
                    }
                }
            }
        }));
        if ran.is_err() {
            eprintln!("dstore: a write panicked and was rolled back");
        }
    }
}

/// The same failure once more, for each caller of a group whose transaction
/// failed as a whole (an error is not `Clone`): of the same kind, with the
/// same message.
fn again(e: &Error) -> Error {
    match e {
        Error::Busy => Error::Busy,
        Error::ReadOnly => Error::ReadOnly,
        Error::ConnectionLost { url, reason } => Error::ConnectionLost { url: url.clone(), reason: reason.clone() },
        Error::OutcomeUnknown { url, reason, check } => {
            Error::OutcomeUnknown { url: url.clone(), reason: reason.clone(), check: check.clone() }
        }
        Error::Storage(s) => Error::Storage(s.clone()),
        e => Error::storage(e.to_string()),
    }
}

/// A runtime for a server: the store's calls run on its blocking threads.
pub fn runtime() -> std::result::Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::environment(format!("cannot start the server's runtime: {e}")))
}

/// Drops a server's last hold on its stores, after its runtime has
/// stopped: a PostgreSQL connection closes by blocking on a runtime of its
/// own, which tokio refuses inside another runtime's tasks (it panics).
pub fn close_outside_runtime(stores: std::sync::Arc<Stores>) {
    drop(stores);
}
