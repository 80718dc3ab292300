//! One cache for what compiling costs: NVRTC's CUBINs and the CPU backend's
//! drivers. On disk, each artefact lives under a key hashed from everything
//! that makes it (source, compiler, options), with a hash that is the same in
//! every build of twobs; in the process, a map in front hands out what was
//! already loaded.
//!
//! twobs loads and runs what it finds there, so the cache is a folder of the
//! user's own that no one else can write (never a relative or a shared one),
//! and each artefact's SHA-256 digest is recorded when it is built and checked
//! before it is loaded: an artefact truncated, emptied or changed by a single
//! bit since is built again, never trusted. The digest file names the
//! artefact it is the digest of, key and all (`sha256sum`'s line: digest,
//! two spaces, name), so that an artefact and its digest moved together onto
//! another key's place are built again too, never loaded for that key.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::write;

/// The cache cannot be placed, made, trusted or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("the cache {}: {cause}", path.display())]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("no folder for the cache of compiled code: {0}")]
    NoPlace(String),
    #[error(
        "the cache folder {} {why}: twobs runs the code it finds there, which anyone who can write that folder could replace; {fix}",
        path.display()
    )]
    NotOwn { path: PathBuf, why: String, fix: &'static str },
}

/// The first 128 bits of the SHA-256 digest of length-prefixed parts:
/// defined by its algorithm, so it names the same artefact in every build
/// (unlike std's DefaultHasher). SHA-256 runs in the processor's SHA
/// instructions where it has them: a built-in's 7 KB spec hashed in 5.9 us
/// on the H200's host, against 12-13 us for the byte-at-a-time FNV-1a this replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(u128);

impl Key {
    pub fn of(parts: &[&[u8]]) -> Key {
        let mut hasher = Sha256::new();
        for p in parts {
            hasher.update((p.len() as u64).to_le_bytes());
            hasher.update(p);
        }
        let digest = hasher.finalize();
        Key(u128::from_le_bytes(digest[..16].try_into().expect("a SHA-256 digest has 32 bytes")))
    }

    /// The key of `value` as printed by `{:?}`: a whole problem (about 7 KB
    /// for a built-in spec, 22-28 us to print and hash on the H200's host),
    /// which memos of a process key what they make from it.
    pub fn of_printed(value: &impl std::fmt::Debug) -> Key {
        Key::of(&[format!("{value:?}").as_bytes()])
    }

    /// The key's 16 bytes, to key something made from what it names.
    pub fn bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }

    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }
}

/// A cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The user's cache: $TWOBS_CACHE, else $XDG_CACHE_HOME/twobs, else
    /// $HOME/.cache/twobs. Each must be an absolute path; there is no
    /// fallback to a folder others share.
    pub fn user() -> Result<Cache, CacheError> {
        Cache::from_vars(|name| std::env::var_os(name))
    }

    /// [`Cache::user`] with the environment read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<Cache, CacheError> {
        const FIX: &str = "set TWOBS_CACHE to an absolute folder of your own";
        let absolute = |name: &str, value: OsString| -> Result<PathBuf, CacheError> {
            let path = PathBuf::from(&value);
            if value.is_empty() {
                Err(CacheError::NoPlace(format!("{name} is set but empty; {FIX}")))
            } else if !path.is_absolute() {
                Err(CacheError::NoPlace(format!(
                    "{name}={} is a relative path, which would put the cache wherever twobs is run from; {FIX}",
                    path.display()
                )))
            } else {
                Ok(path)
            }
        };
        let dir = if let Some(dir) = var("TWOBS_CACHE") {
            absolute("TWOBS_CACHE", dir)?
        } else if let Some(dir) = var("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            absolute("XDG_CACHE_HOME", dir)?.join("twobs")
        } else if let Some(home) = var("HOME") {
            absolute("HOME", home)?.join(".cache").join("twobs")
        } else {
            return Err(CacheError::NoPlace(format!(
                "HOME is not set (nor XDG_CACHE_HOME or TWOBS_CACHE), and twobs does not share a folder with other users; {FIX}"
            )));
        };
        Ok(Cache { dir })
    }

    /// A cache in `dir` (the tests keep theirs out of the user's).
    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The place of artefact `stem` under `key` in `kind` (`cuda`, `cpu`),
    /// its folder made (mode 0700) and checked to be the user's own.
    pub fn entry(&self, kind: &str, stem: &str, key: Key, extension: &str) -> Result<Entry, CacheError> {
        let dir = self.dir.join(kind);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|cause| CacheError::Io { path: dir.clone(), cause })?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        check_own_folder(&self.dir, me)?;
        check_own_folder(&dir, me)?;
        Ok(Entry { path: dir.join(format!("{}-{}.{extension}", bounded(stem), key.hex())) })
    }
}

/// The most bytes of a name in an entry's file name: the key makes it
/// unique, and the whole stays far below NAME_MAX (255) whatever the
/// problem is called.
const STEM_BYTES: usize = 64;

fn bounded(stem: &str) -> &str {
    let mut end = stem.len().min(STEM_BYTES);
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    &stem[..end]
}

/// Refuses a cache folder that user `uid` does not own, or that others may write.
pub fn check_own_folder(dir: &Path, uid: u32) -> Result<(), CacheError> {
    let meta = std::fs::metadata(dir).map_err(|cause| CacheError::Io { path: dir.to_owned(), cause })?;
    const ELSEWHERE: &str = "use a folder of your own (TWOBS_CACHE=/absolute/folder)";
    let not_own = |why: String, fix| Err(CacheError::NotOwn { path: dir.to_owned(), why, fix });
    if !meta.is_dir() {
        return not_own("is not a folder".into(), ELSEWHERE);
    }
    if meta.uid() != uid {
        return not_own(format!("belongs to user {}, not to you (user {uid})", meta.uid()), ELSEWHERE);
    }
    if meta.mode() & 0o022 != 0 {
        let why = format!("can be written by others (mode {:o})", meta.mode() & 0o7777);
        return not_own(why, "make it yours alone (chmod go-w), or use another folder of your own (TWOBS_CACHE)");
    }
    Ok(())
}

/// One artefact's place in the cache, with its digest beside it (`.sha256`).
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
}

/// Why an entry is not loaded as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Never built (or its digest was never recorded).
    Missing,
    /// Its bytes are not those recorded when it was built.
    Changed(String),
}

impl Entry {
    fn digest_path(&self) -> PathBuf {
        let mut name = self.path.file_name().expect("an entry has a name").to_owned();
        name.push(".sha256");
        self.path.with_file_name(name)
    }

    /// The artefact's bytes, where they are those recorded when it was built.
    pub fn read(&self) -> Result<Vec<u8>, Damage> {
        let bytes = std::fs::read(&self.path).map_err(|_| Damage::Missing)?;
        self.check(&bytes).map(|()| bytes)
    }

    /// Whether the artefact is whole and the user's own: its digest as
    /// recorded, its file not writable by others. What is loaded from it is
    /// then what twobs built.
    pub fn verify(&self) -> Result<(), Damage> {
        let bytes = std::fs::read(&self.path).map_err(|_| Damage::Missing)?;
        self.check(&bytes)
    }

    /// The artefact's file name, which its digest file records: the key is in it.
    fn name(&self) -> String {
        self.path.file_name().expect("an entry has a name").to_string_lossy().into_owned()
    }

    fn check(&self, bytes: &[u8]) -> Result<(), Damage> {
        let line = std::fs::read_to_string(self.digest_path()).map_err(|_| Damage::Missing)?;
        let (recorded, named) = line.trim_end_matches('\n').split_once("  ").unwrap_or((line.trim(), ""));
        if named != self.name() {
            return Err(Damage::Changed(format!(
                "{}'s digest is recorded for {}, not for it (an artefact of another key in its place)",
                self.path.display(),
                if named.is_empty() { "no name" } else { named }
            )));
        }
        let meta = std::fs::symlink_metadata(&self.path).map_err(|_| Damage::Missing)?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(Damage::Changed(format!("{} is not a file of your own", self.path.display())));
        }
        let found = hex_digest(bytes);
        if recorded != found {
            return Err(Damage::Changed(format!(
                "{} ({} bytes) is not what was built: its SHA-256 begins {}, and {} was recorded",
                self.path.display(),
                bytes.len(),
                &found[..12],
                recorded.get(..12).unwrap_or("nothing")
            )));
        }
        Ok(())
    }

    /// Records the digest of `bytes`, then puts `artefact` (a partial file
    /// holding them) in place: a reader that finds the artefact finds its
    /// digest, and one that meets a half-made pair rebuilds it.
    pub fn commit(&self, artefact: write::Staged, bytes: &[u8]) -> Result<(), CacheError> {
        let digest = self.digest_path();
        write::file_atomically(&digest, |w| writeln!(w, "{}  {}", hex_digest(bytes), self.name()))
            .map_err(|cause| CacheError::Io { path: digest.clone(), cause })?;
        write::commit(vec![artefact]).map_err(|(path, cause)| CacheError::Io { path, cause })
    }

    /// A partial file beside the entry to make it in (made exclusively, and
    /// removed unless committed), so that no reader, in this process or
    /// another, ever sees half an artefact.
    pub fn partial(&self) -> Result<write::Staged, CacheError> {
        write::Staged::create(&self.path)
            .map(|(staged, _)| staged)
            .map_err(|cause| CacheError::Io { path: self.path.clone(), cause })
    }

    pub fn write(&self, bytes: &[u8]) -> Result<(), CacheError> {
        let staged = write::stage(&self.path, |w| w.write_all(bytes))
            .map_err(|cause| CacheError::Io { path: self.path.clone(), cause })?;
        self.commit(staged, bytes)
    }
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Generated programs (GPU kernels, CPU drivers and probes) this process has
/// compiled or found in the disk cache, each distinct one once however many
/// runs use it: what a trajectory of many boxes must keep at one more.
static PROGRAMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many distinct generated programs this process has compiled or loaded ([`PROGRAMS`]).
pub fn programs() -> u64 {
    PROGRAMS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts one more distinct program, where one is made or loaded the first time.
pub fn count_program() {
    PROGRAMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// What this process already built or loaded, by key.
pub struct Memo<T> {
    map: Mutex<Option<HashMap<Key, Slot<T>>>>,
}

/// One key's value, made once: callers wanting the same key wait for the
/// first; callers wanting other keys do not.
type Slot<T> = Arc<Mutex<Option<Arc<T>>>>;

impl<T> Memo<T> {
    pub const fn new() -> Self {
        Memo { map: Mutex::new(None) }
    }

    /// The value under `key`, made by `make` the first time (and again after a failure).
    pub fn get_or_try<E>(&self, key: Key, make: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        let slot = self.map.lock().expect("memo lock").get_or_insert_with(HashMap::new).entry(key).or_default().clone();
        let mut value = slot.lock().expect("memo slot lock");
        if let Some(v) = value.as_ref() {
            return Ok(v.clone());
        }
        let made = Arc::new(make()?);
        *value = Some(made.clone());
        Ok(made)
    }
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is the digest's first 16 bytes (little-endian) of the
    /// length-prefixed parts: pinned, since it names files on disk.
    #[test]
    fn keys_are_the_sha256_of_length_prefixed_parts() {
        let mut prefixed = 3u64.to_le_bytes().to_vec();
        prefixed.extend_from_slice(b"abc");
        let digest = Sha256::digest(&prefixed);
        assert_eq!(Key::of(&[b"abc"]).hex(), format!("{:032x}", u128::from_le_bytes(digest[..16].try_into().unwrap())));
        assert_eq!(Key::of(&[]).hex(), "24b96f99c8f4fb9a141cfc9842c4b0e3");
    }

    #[test]
    fn sha256_matches_the_published_test_vector() {
        assert_eq!(hex_digest(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(Key::of(&[b"ab", b"c"]), Key::of(&[b"a", b"bc"]));
        assert_eq!(Key::of(&[b"ab", b"c"]), Key::of(&[b"ab", b"c"]));
    }
}
