//! One cache for what compiling costs: NVRTC's CUBINs and the CPU backend's
//! drivers. On disk, each artefact lives under a key hashed from everything
//! that makes it (source, compiler, options), with a hash that is the same in
//! every build of twobs; in the process, a map in front hands out what was
//! already loaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A cache folder could not be made or written.
#[derive(Debug, thiserror::Error)]
#[error("the cache {}: {source}", path.display())]
pub struct CacheError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A 128-bit FNV-1a hash of length-prefixed parts: defined by its algorithm,
/// so it names the same artefact in every build (unlike std's DefaultHasher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(u128);

impl Key {
    pub fn of(parts: &[&[u8]]) -> Key {
        let mut bytes = Vec::new();
        for p in parts {
            bytes.extend_from_slice(&(p.len() as u64).to_le_bytes());
            bytes.extend_from_slice(p);
        }
        Key(fnv1a_128(&bytes))
    }

    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }
}

fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ b as u128).wrapping_mul(PRIME))
}

/// A cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The user's cache: $TWOBS_CACHE, else $XDG_CACHE_HOME/twobs, else
    /// ~/.cache/twobs, else a folder in the temp dir.
    pub fn user() -> Cache {
        let dir = if let Some(dir) = std::env::var_os("TWOBS_CACHE") {
            PathBuf::from(dir)
        } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            PathBuf::from(dir).join("twobs")
        } else if let Some(home) = std::env::var_os("HOME") {
            PathBuf::from(home).join(".cache").join("twobs")
        } else {
            std::env::temp_dir().join("twobs-cache")
        };
        Cache { dir }
    }

    /// A cache in `dir` (the tests keep theirs out of the user's).
    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The place of artefact `stem` under `key` in `kind` (`cuda`, `cpu`), its folder made.
    pub fn entry(&self, kind: &str, stem: &str, key: Key, extension: &str) -> Result<Entry, CacheError> {
        let dir = self.dir.join(kind);
        std::fs::create_dir_all(&dir).map_err(|source| CacheError { path: dir.clone(), source })?;
        Ok(Entry { path: dir.join(format!("{stem}-{}.{extension}", key.hex())) })
    }
}

/// One artefact's place in the cache.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
}

impl Entry {
    pub fn read(&self) -> Option<Vec<u8>> {
        std::fs::read(&self.path).ok()
    }

    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// A path beside the entry to make it in, unique to this call; [`Entry::commit`]
    /// moves it into place, so that no reader, in this process or another,
    /// ever sees half an artefact.
    pub fn partial(&self) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let ext = self.path.extension().and_then(|e| e.to_str()).unwrap_or("bin");
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.path.with_extension(format!("{}-{n}.partial.{ext}", std::process::id()))
    }

    pub fn commit(&self, partial: &Path) -> Result<(), CacheError> {
        std::fs::rename(partial, &self.path).map_err(|source| CacheError { path: self.path.clone(), source })
    }

    pub fn write(&self, bytes: &[u8]) -> Result<(), CacheError> {
        let partial = self.partial();
        std::fs::write(&partial, bytes).map_err(|source| CacheError { path: partial.clone(), source })?;
        self.commit(&partial)
    }
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

    #[test]
    fn fnv1a_128_matches_the_published_test_vectors() {
        assert_eq!(fnv1a_128(b""), 0x6c62272e07bb014262b821756295c58d);
        assert_eq!(fnv1a_128(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(Key::of(&[b"ab", b"c"]), Key::of(&[b"a", b"bc"]));
        assert_eq!(Key::of(&[b"ab", b"c"]), Key::of(&[b"ab", b"c"]));
    }
}
