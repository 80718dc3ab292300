//! An internal error (a panic, in the command or a thread it joined) is one
//! line and its own exit status, and leaves no partial file behind.

use twobs::cli::{INTERNAL_ERROR, guarded, internal_error_line};

#[test]
fn a_panic_in_a_worker_thread_exits_with_the_internal_error_status() {
    let code = guarded(|| {
        std::thread::scope(|s| s.spawn(|| -> () { panic!("index out of bounds") }).join().expect("a worker panicked"));
        Ok(())
    });
    assert_eq!(code, INTERNAL_ERROR);
    // An ordinary error is status 1, a success 0.
    assert_eq!(guarded(|| Err(anyhow::anyhow!("a bad input"))), 1);
    assert_eq!(guarded(|| Ok(())), 0);
    let line = internal_error_line("index out of bounds at src/index.rs:268:35");
    assert!(!line.contains('\n') && line.contains("src/index.rs:268:35") && line.contains("report"), "{line}");
}

#[test]
fn a_panic_while_writing_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.npy");
    let unwound = std::panic::catch_unwind(|| {
        twobs::write::file_atomically(&path, |w| {
            w.write_all(b"half a result")?;
            panic!("a bug while writing")
        })
    });
    assert!(unwound.is_err());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
