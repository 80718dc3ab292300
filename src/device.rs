//! What the planner needs to know about a GPU: resource limits, peak rates,
//! and the constants of the output-collision model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The birthday-collision latency model's constants (paper eq. 2-5).
/// Only their ratio affects the choice of copy count; C_L is the unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelConstants {
    /// Latency of a round in which no two lanes of a warp hit the same output slot.
    pub c_l: f64,
    /// Extra latency each further colliding lane adds.
    pub c_lp: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    /// Profile name, or the live device's name.
    pub name: String,
    /// `profile` or `live GPU <ordinal>`.
    pub origin: String,
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    pub shared_per_sm: u32,
    /// Shared memory a block gets without opting in.
    pub shared_per_block: u32,
    /// Shared memory a block may have after raising its dynamic limit.
    pub shared_per_block_optin: u32,
    /// Shared memory the system reserves for each resident block (1 KiB from sm_80).
    pub shared_reserved_per_block: u32,
    pub registers_per_sm: u32,
    pub max_registers_per_thread: u32,
    pub threads_per_sm: u32,
    pub blocks_per_sm: u32,
    /// Read-only data cache per multiprocessor. Where L1 and shared memory are one
    /// array (`unified_l1`), this is the whole array and shared memory comes out of it.
    pub readonly_cache_per_sm: u32,
    pub unified_l1: bool,
    pub boost_clock_mhz: u32,
    pub fp32_lanes_per_sm: u32,
    pub memory_bandwidth_gbs: f64,
    pub model: ModelConstants,
    /// The kernel shapes measured fastest on this kind of GPU, where measured;
    /// elsewhere the paper's rules decide.
    pub tuning: Option<Tuning>,
    /// Shapes measured for one problem (by name) by `twobs tune PROBLEM`.
    pub tuned_problems: BTreeMap<String, Tuning>,
    /// The shapes of the kernels that walk a grid's units, measured on this
    /// kind of GPU (`twobs tune` times brute force's tiles only).
    pub grid_tuning: Option<Tuning>,
}

/// Where the other points of each pair are cached (the input stage's rules
/// are in `stage::input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputCache {
    /// Own point in registers, the other block's tile in shared memory.
    RegisterShm,
    /// Own point in registers, the tile read through the read-only cache.
    RegisterRoc,
    /// Tiles passed around a warp with __shfl_sync; no shared memory.
    Shuffle,
    /// No staging: every thread reads the other points from global memory (Algorithm 1).
    Naive,
}

/// The shapes of the kernels that sum pairs into totals, measured on a GPU:
/// what the planner picks there instead of the paper's rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// Totals in shared copies (histograms): threads a block, own points a
    /// thread, lane copies (1: one copy a block), where the other points wait.
    pub shared: KernelShape,
    /// Totals in registers (counts, sums).
    pub registers: KernelShape,
    /// Where the numbers come from.
    pub source: String,
}

/// One kernel shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelShape {
    pub block_size: u32,
    pub points_per_thread: u32,
    /// Shared output copies (ignored for totals in registers).
    pub copies: u32,
    pub input_cache: InputCache,
}

impl std::fmt::Display for KernelShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-b{}-r{}-c{}", self.input_cache.name(), self.block_size, self.points_per_thread, self.copies)
    }
}

/// Brute force's tiles on Hopper, measured on the H200 against the planner's
/// earlier B = 256, R = 2 and R = 4 at B = 256 and 1024, R = 8 at B = 256
/// (bench/shapes.sh, docs/benchmarks.md#kernel-shapes-on-hopper): B =
/// 512, R = 4 ran fastest or within 2% on SDH (50 and 500 buckets), RDF (open
/// and periodic boxes) and 2PCF over every pair, 0.4-7% faster than B = 256,
/// R = 2. Each tile point read serves four pairs, which halves the warp votes
/// and tile loads a pair. 16 and 32 lane copies ran within 5% of each other
/// and 1.5x faster than the copy model's 2 at B = 64 (the model sees
/// collisions, not bank conflicts: `git show 2c654b2:docs/bench/h200-issue10-sweep.md`).
fn hopper_sweep() -> Tuning {
    shared_tiles(512, 4, "measured on an H200 (docs/benchmarks.md#kernel-shapes-on-hopper)")
}

/// The grid's kernels on Hopper: B = 256, R = 2 walked 2PCF's grid 1.5x faster
/// than B = 512, R = 4 on the H200 (docs/benchmarks.md#kernel-shapes-on-hopper).
fn hopper_grid() -> Tuning {
    shared_tiles(256, 2, "measured on an H200's grids (docs/benchmarks.md#kernel-shapes-on-hopper)")
}

/// B threads of R own points, tiles in shared memory; 16 lane copies where
/// totals are shared, none where they are in registers.
fn shared_tiles(block_size: u32, points_per_thread: u32, source: &str) -> Tuning {
    let shape = |copies| KernelShape { block_size, points_per_thread, copies, input_cache: InputCache::RegisterShm };
    Tuning { shared: shape(16), registers: shape(1), source: source.into() }
}

/// Fitted to the paper's Table 5 (theoretical column): with C_L = 1 the copy
/// counts it lists for SDH on 512,000 points come out of the model for C_LP = 0.6
/// (see docs/planner.md for the fit and its residuals).
const PASCAL_FIT: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.6, source: "fitted to the paper's Table 5 (Titan XP)" };

/// Fitted to SDH on an H100 (50 and 500 buckets, 1 to 32 copies, 1,000,000
/// points): the C_LP whose R x L best matches the measured times (docs/planner.md).
/// Collisions cost little on Hopper next to the atomic throughput itself.
const HOPPER_FIT: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.03, source: "fitted to SDH times measured on an H100" };

/// No measurement yet on this architecture: the Pascal fit stands in.
const UNMEASURED: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.6, source: "not yet measured on this GPU; the Titan XP fit stands in" };

/// A GPU's shapes as `twobs tune` measured them, on disk: one JSON file per
/// GPU name, read by every later run and plan on a GPU of that name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedProfile {
    /// The GPU's name, as the driver gives it.
    pub device: String,
    pub compute_capability: (u32, u32),
    /// The shapes fitted to every problem tuned together (`twobs tune`).
    pub tuning: Option<Tuning>,
    /// Shapes fitted to one problem (`twobs tune PROBLEM`), by the problem's name.
    pub problems: BTreeMap<String, Tuning>,
    /// Each sweep's table as measured ("" for every problem together).
    pub sweeps: BTreeMap<String, serde_json::Value>,
}

/// A tuned profile that cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the tuned profile {}: {why}", path.display())]
pub struct ProfileError {
    pub path: std::path::PathBuf,
    pub why: String,
}

impl TunedProfile {
    /// The folder of tuned profiles: $TWOBS_PROFILES, else
    /// $XDG_CONFIG_HOME/twobs/profiles, else ~/.config/twobs/profiles. Each
    /// must be absolute; there is no fallback to a folder others share (a
    /// profile planted there would steer the plans of whoever reads it).
    pub fn folder() -> Result<std::path::PathBuf, ProfileError> {
        TunedProfile::folder_from(|name| std::env::var_os(name))
    }

    /// [`TunedProfile::folder`] with the environment read through `var`.
    pub fn folder_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<std::path::PathBuf, ProfileError> {
        use std::path::PathBuf;
        let absolute = |name: &str, value: std::ffi::OsString| {
            let path = PathBuf::from(&value);
            match path.is_absolute() {
                true => Ok(path),
                false => Err(ProfileError {
                    path,
                    why: format!(
                        "{name} is empty or a relative path; set TWOBS_PROFILES to an absolute folder of your own"
                    ),
                }),
            }
        };
        if let Some(dir) = var("TWOBS_PROFILES") {
            absolute("TWOBS_PROFILES", dir)
        } else if let Some(dir) = var("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
            Ok(absolute("XDG_CONFIG_HOME", dir)?.join("twobs").join("profiles"))
        } else if let Some(home) = var("HOME") {
            Ok(absolute("HOME", home)?.join(".config").join("twobs").join("profiles"))
        } else {
            Err(ProfileError {
                path: PathBuf::from("twobs/profiles"),
                why: "HOME is not set (nor XDG_CONFIG_HOME or TWOBS_PROFILES), and twobs shares no folder with \
                      other users; set TWOBS_PROFILES to an absolute folder of your own"
                    .into(),
            })
        }
    }

    /// Where the profile of GPU `name` lives in `folder`: its name in lower
    /// case, every other character a dash (`NVIDIA H200` -> `nvidia-h200.json`).
    pub fn path_in(folder: &std::path::Path, name: &str) -> std::path::PathBuf {
        let slug: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
        folder.join(format!("{}.json", slug.trim_matches('-')))
    }

    /// The profile at `path`, or None where there is none. Only a file of
    /// the user's own, which others cannot write, is read.
    pub fn read(path: &std::path::Path) -> Result<Option<TunedProfile>, ProfileError> {
        use std::os::unix::fs::MetadataExt;
        let fail = |why: String| ProfileError { path: path.to_owned(), why };
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e.to_string())),
        };
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(fail(format!(
                "belongs to user {} (mode {:o}); twobs reads only tuned profiles of your own that others cannot write (remove it, or set TWOBS_PROFILES to a folder of your own)",
                meta.uid(),
                meta.mode() & 0o7777
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        serde_json::from_str(&text).map(Some).map_err(|e| {
            fail(format!("{e}; it was not written by `twobs tune` (run it again to replace it, or remove the file)"))
        })
    }

    /// Writes the profile to `path` (through a file beside it, renamed into
    /// place), never over a file that is not a tuned profile.
    pub fn write(&self, path: &std::path::Path) -> Result<(), ProfileError> {
        let fail = |why: String| ProfileError { path: path.to_owned(), why };
        if path.exists() {
            TunedProfile::read(path).map_err(|e| fail(format!("not replaced: {}", e.why)))?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| fail(format!("making its folder: {e}")))?;
        }
        let text = serde_json::to_string_pretty(self).expect("a profile serializes");
        let partial = path.with_extension("json.partial");
        // The user's alone, as `read` asks, whatever the umask.
        let written = {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(&partial);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&partial)
                .and_then(|mut f| f.write_all((text + "\n").as_bytes()))
        };
        written.map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&partial, path).map_err(|e| fail(e.to_string()))
    }

    /// The live device `dev` with the shapes of this profile, read from `path`.
    pub fn apply(self, dev: Device, path: &std::path::Path) -> Result<Device, ProfileError> {
        if self.compute_capability != dev.compute_capability {
            let (a, b) = (self.compute_capability, dev.compute_capability);
            return Err(ProfileError {
                path: path.to_owned(),
                why: format!(
                    "measured on sm_{}{}, but this {} is sm_{}{}; run `twobs tune` again",
                    a.0, a.1, dev.name, b.0, b.1
                ),
            });
        }
        Ok(Device {
            origin: format!("{}, shapes from {}", dev.origin, path.display()),
            tuning: self.tuning.or(dev.tuning),
            tuned_problems: self.problems,
            ..dev
        })
    }
}

pub const PROFILE_NAMES: [&str; 4] = ["titanxp", "a100", "h100", "h200"];

impl Device {
    /// A named profile: titanxp (the paper's GPU), a100, h100, h200.
    pub fn profile(name: &str) -> Option<Device> {
        let kib = |k: u32| k * 1024;
        let d = match name {
            // NVIDIA TITAN Xp (GP102, sm_61): 30 SMs, 96 KiB shared/SM, 48 KiB L1/texture per SM.
            "titanxp" => Device {
                name: "titanxp".into(),
                origin: "profile".into(),
                compute_capability: (6, 1),
                multiprocessors: 30,
                shared_per_sm: kib(96),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(48),
                shared_reserved_per_block: 0,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(48),
                unified_l1: false,
                boost_clock_mhz: 1582,
                fp32_lanes_per_sm: 128,
                memory_bandwidth_gbs: 547.6,
                model: PASCAL_FIT,
                tuning: None,
                tuned_problems: BTreeMap::new(),
                grid_tuning: None,
            },
            // A100 SXM4 80 GB (sm_80): 108 SMs, 192 KiB L1/shared per SM, up to 164 KiB shared.
            "a100" => Device {
                name: "a100".into(),
                origin: "profile".into(),
                compute_capability: (8, 0),
                multiprocessors: 108,
                shared_per_sm: kib(164),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(163),
                shared_reserved_per_block: 1024,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(192),
                unified_l1: true,
                boost_clock_mhz: 1410,
                fp32_lanes_per_sm: 64,
                memory_bandwidth_gbs: 2039.0,
                model: UNMEASURED,
                tuning: None,
                tuned_problems: BTreeMap::new(),
                grid_tuning: None,
            },
            // H100 SXM5 80 GB (sm_90): 132 SMs, 256 KiB L1/shared per SM, up to 228 KiB shared.
            "h100" => Device {
                name: "h100".into(),
                origin: "profile".into(),
                compute_capability: (9, 0),
                multiprocessors: 132,
                shared_per_sm: kib(228),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(227),
                shared_reserved_per_block: 1024,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(256),
                unified_l1: true,
                boost_clock_mhz: 1980,
                fp32_lanes_per_sm: 128,
                memory_bandwidth_gbs: 3350.0,
                model: HOPPER_FIT,
                tuning: Some(hopper_sweep()),
                tuned_problems: BTreeMap::new(),
                grid_tuning: Some(hopper_grid()),
            },
            // H200 SXM 141 GB: the H100's chip with faster, larger memory.
            "h200" => Device { name: "h200".into(), memory_bandwidth_gbs: 4800.0, ..Device::profile("h100")? },
            _ => return None,
        };
        Some(d)
    }

    /// The NVRTC target for this device, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// Peak FP32 instruction issue rate (one FMA counts once), in instructions per second.
    pub fn fp32_issue_rate(&self) -> f64 {
        self.multiprocessors as f64 * self.fp32_lanes_per_sm as f64 * self.boost_clock_mhz as f64 * 1e6
    }

    /// The shapes measured for `problem` on this GPU, else for every problem.
    pub fn tuning_for(&self, problem: &str) -> Option<&Tuning> {
        self.tuned_problems.get(problem).or(self.tuning.as_ref())
    }

    /// The profile whose model constants best describe a live device of this compute capability.
    pub fn closest_profile(cc: (u32, u32)) -> Device {
        let name = match cc.0 {
            0..=7 => "titanxp",
            8 => "a100",
            _ => "h100",
        };
        Device::profile(name).expect("profile exists")
    }
}

#[cfg(test)]
mod tests {
    use super::TunedProfile;
    use std::ffi::OsString;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn profiles_live_in_a_folder_of_the_users_own() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
        };
        assert_eq!(TunedProfile::folder_from(vars(&[("TWOBS_PROFILES", "/p")])).unwrap().to_str(), Some("/p"));
        let home = TunedProfile::folder_from(vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(home.to_str(), Some("/home/u/.config/twobs/profiles"));
        // No shared fallback, nothing relative or empty.
        for pairs in [&[][..], &[("HOME", "")][..], &[("TWOBS_PROFILES", "rel")][..], &[("XDG_CONFIG_HOME", "x")][..]] {
            let e = TunedProfile::folder_from(vars(pairs)).unwrap_err();
            assert!(e.why.contains("absolute folder of your own"), "{pairs:?}: {}", e.why);
        }
    }

    #[test]
    fn a_profile_others_can_write_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu.json");
        let profile = TunedProfile {
            device: "GPU".into(),
            compute_capability: (9, 0),
            tuning: None,
            problems: Default::default(),
            sweeps: Default::default(),
        };
        profile.write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "written for its user alone");
        assert!(TunedProfile::read(&path).unwrap().is_some());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = TunedProfile::read(&path).unwrap_err();
        assert!(e.why.contains("others cannot write"), "{}", e.why);
    }
}
