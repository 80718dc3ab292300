//! Code twobs did not build (issue 30, item 10): the cache of compiled code
//! is a folder of the user's own, never relative or shared, and an artefact
//! whose bytes are not those recorded when it was built is built again,
//! never loaded.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use twobs::cache::{Cache, CacheError, Damage, Key, check_own_folder};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A count on the CPU with the cache in `cache`.
fn count(cache: &Path, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_twobs"))
        .env("TWOBS_CACHE", cache)
        .args(["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--quiet"])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn from(vars: &[(&str, &str)]) -> Result<Cache, CacheError> {
    Cache::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v)))
}

#[test]
fn the_cache_is_never_relative_or_shared() {
    assert_eq!(from(&[("HOME", "/home/u")]).unwrap().dir(), Path::new("/home/u/.cache/twobs"));
    assert_eq!(from(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]).unwrap().dir(), Path::new("/x/twobs"));
    // An empty XDG_CACHE_HOME is unset (the XDG spec's rule).
    assert_eq!(from(&[("HOME", "/h"), ("XDG_CACHE_HOME", "")]).unwrap().dir(), Path::new("/h/.cache/twobs"));
    assert_eq!(from(&[("HOME", "/h"), ("TWOBS_CACHE", "/c")]).unwrap().dir(), Path::new("/c"));
    for (vars, says) in [
        (&[("HOME", "")][..], "HOME is set but empty"),
        (&[("HOME", "here")], "HOME=here is a relative path"),
        (&[("HOME", "/h"), ("XDG_CACHE_HOME", "cache")], "XDG_CACHE_HOME=cache is a relative path"),
        (&[("HOME", "/h"), ("TWOBS_CACHE", "")], "TWOBS_CACHE is set but empty"),
        (&[("HOME", "/h"), ("TWOBS_CACHE", "./c")], "TWOBS_CACHE=./c is a relative path"),
        (&[], "HOME is not set"),
    ] {
        let e = from(vars).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("set TWOBS_CACHE to an absolute folder"), "{vars:?}: {e}");
    }
    // Without HOME the run stops with the reason, and makes nothing in the temp dir.
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_twobs"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("TMPDIR", tmp.path())
        .args(["run", "2pcf", "--backend", "cpu", "--input", "uniform:30"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("HOME is not set"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "a cache was made in the shared temp dir");
}

#[test]
fn a_cache_folder_that_others_own_or_can_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let o = count(&cache, dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    // The folders twobs makes are the user's alone.
    for folder in [cache.clone(), cache.join("cpu")] {
        assert_eq!(std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700, "{}", folder.display());
    }
    for folder in [cache.clone(), cache.join("cpu")] {
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        let o = count(&cache, dir.path());
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(e.contains(&format!("the cache folder {} can be written by others", folder.display())), "{e}");
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Another user's folder (checked as if this process were another user).
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert!(check_own_folder(&cache, me).is_ok());
    let e = check_own_folder(&cache, me + 1).unwrap_err().to_string();
    assert!(e.contains(&format!("belongs to user {me}, not to you (user {})", me + 1)), "{e}");
}

#[test]
fn a_damaged_driver_is_built_again_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let first = count(&cache, dir.path());
    assert!(first.status.success(), "{}", stderr(&first));
    let so = std::fs::read_dir(cache.join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .unwrap();
    let built = std::fs::read(&so).unwrap();
    let mut digest = so.clone().into_os_string();
    digest.push(".sha256");
    type Harm<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let damages: Vec<Harm> = vec![
        ("truncated", Box::new(|| std::fs::write(&so, &built[..built.len() / 2]).unwrap())),
        ("emptied", Box::new(|| std::fs::write(&so, b"").unwrap())),
        ("one bit flipped at the start", Box::new(|| flip(&so, &built, 0x41))),
        ("one bit flipped in the middle", Box::new(|| flip(&so, &built, built.len() / 2))),
        ("one bit flipped at the end", Box::new(|| flip(&so, &built, built.len() - 3))),
        ("digest lost", Box::new(|| std::fs::remove_file(&digest).unwrap())),
    ];
    for (damage, apply) in damages {
        apply();
        let o = count(&cache, dir.path());
        assert!(o.status.success(), "{damage}: {:?} {}", o.status, stderr(&o));
        assert_eq!(o.stdout, first.stdout, "{damage}: another count");
        assert_eq!(std::fs::read(&so).unwrap(), built, "{damage}: the driver was not built again");
    }
}

fn flip(path: &Path, bytes: &[u8], at: usize) {
    let mut b = bytes.to_vec();
    b[at] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_cubin_is_read_only_with_the_digest_it_was_built_with() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::at(dir.path());
    let entry = cache.entry("cuda", "sdh", Key::of(&[b"a kernel"]), "cubin").unwrap();
    assert_eq!(entry.read(), Err(Damage::Missing));
    let cubin: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    entry.write(&cubin).unwrap();
    assert_eq!(entry.read().unwrap(), cubin);
    flip(&entry.path, &cubin, 1000);
    assert!(matches!(entry.read(), Err(Damage::Changed(why)) if why.contains("is not what was built")));
    std::fs::write(&entry.path, &cubin[..10]).unwrap();
    assert!(matches!(entry.read(), Err(Damage::Changed(_))));
}

#[test]
fn cache_file_names_are_bounded_whatever_the_problem_is_called() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("p{}", "x".repeat(240));
    let spec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manhattan/manhattan.xml"))
        .unwrap()
        .replace("name=\"manhattan\"", &format!("name=\"{name}\""));
    std::fs::write(dir.path().join("long.xml"), spec).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manhattan/manhattan.cu"),
        dir.path().join("manhattan.cu"),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_twobs"))
        .env("TWOBS_CACHE", dir.path().join("cache"))
        .args(["run", "long.xml", "--backend", "cpu", "--input", "uniform:100", "--dims", "4", "--quiet"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for e in std::fs::read_dir(dir.path().join("cache/cpu")).unwrap() {
        let len = e.unwrap().file_name().len();
        assert!(len < 128, "a cache file name of {len} bytes");
    }
}
