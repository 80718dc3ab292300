//! NVRTC through cudarc: CUDA source -> CUBIN for one architecture. The same
//! code path serves the runner and the compile tests (NVRTC needs no GPU).

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cudarc::nvrtc::{result, sys};

use crate::cache::{Cache, CacheError, Key, Memo};
use crate::codegen::{Kernel, NVRTC_OPTIONS};

/// Why NVRTC gave no CUBIN.
#[derive(Debug, thiserror::Error)]
pub enum NvrtcError {
    #[error(
        "libnvrtc (CUDA 13) was found neither on the library path nor in {searched}; install the CUDA toolkit or `pip install nvidia-cuda-nvrtc==13.0.*`, or set CUDA_PATH to the folder holding lib64/libnvrtc.so.13"
    )]
    Missing { searched: String },
    // The cause is in the message, so it is not also the error's source
    // (`{:#}` would print it twice).
    #[error("NVRTC failed: {0}")]
    Api(result::NvrtcError),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl From<result::NvrtcError> for NvrtcError {
    fn from(e: result::NvrtcError) -> Self {
        NvrtcError::Api(e)
    }
}

/// A kernel that did not compile, with the evidence: the compiler's log, the
/// exact options, and the lines the log points at, in the user's snippet or
/// the generated code.
#[derive(Debug, thiserror::Error)]
#[error("NVRTC could not compile {file} with options {}:\n{}{excerpt}", options.join(" "), log.trim_end())]
pub struct CompileError {
    pub file: String,
    pub options: Vec<String>,
    pub log: String,
    pub excerpt: String,
}

/// A kernel compiled for one architecture.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub arch: String,
    pub cubin: Vec<u8>,
    /// The compiler's log (warnings and the ptxas resource report).
    pub log: String,
    pub registers: Option<u32>,
    /// Bytes of local memory the kernel spills to.
    pub spill_bytes: u32,
}

/// Whether libnvrtc can be loaded: from the loader's path, else from where
/// CUDA toolkits and NVIDIA's Python wheels put it ([`search_folders`]), so
/// that every command finds it the same way without LD_LIBRARY_PATH.
pub fn available() -> Result<(), NvrtcError> {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: only probes whether the shared library can be opened.
            if unsafe { sys::is_culib_present() } {
                return Ok(());
            }
            let folders = search_folders();
            for folder in &folders {
                if preload(folder) {
                    return Ok(());
                }
            }
            Err(folders.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "))
        })
        .clone()
        .map_err(|searched| NvrtcError::Missing { searched })
}

/// Loads `folder`'s libnvrtc.so.13 (and its builtins) by full path and keeps
/// them loaded: the loader then resolves cudarc's later `libnvrtc.so.13` by
/// its soname to this copy.
fn preload(folder: &Path) -> bool {
    let nvrtc = folder.join("libnvrtc.so.13");
    if !nvrtc.is_file() {
        return false;
    }
    for lib in ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"] {
        // SAFETY: NVIDIA's library; its initializers only set up NVRTC.
        match unsafe { libloading::Library::new(folder.join(lib)) } {
            Ok(loaded) => std::mem::forget(loaded),
            Err(_) if lib != "libnvrtc.so.13" => {}
            Err(_) => return false,
        }
    }
    // SAFETY: as above; true once the soname resolves.
    unsafe { sys::is_culib_present() }
}

/// Where NVRTC is looked for beyond the loader's path, in order: $CUDA_PATH
/// and $CUDA_HOME, the usual toolkit folders, and `nvidia/cu13/lib` of the
/// pip wheel in the active virtual environment, the user's and the system's
/// site-packages.
pub fn search_folders() -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let root = PathBuf::from(root);
            folders.extend([root.join("lib64"), root.join("lib"), root.join("nvidia/cu13/lib")]);
        }
    }
    folders.extend(["/usr/local/cuda/lib64", "/usr/local/cuda-13.0/lib64", "/opt/cuda/lib64"].map(PathBuf::from));
    let mut python_roots: Vec<PathBuf> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").or_else(|| std::env::var_os("CONDA_PREFIX")) {
        python_roots.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        python_roots.push(PathBuf::from(home).join(".local/lib"));
    }
    python_roots.extend(["/usr/local/lib", "/usr/lib"].map(PathBuf::from));
    for root in python_roots {
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3")))
            .collect();
        pythons.sort();
        for python in pythons.iter().rev() {
            for packages in ["site-packages", "dist-packages"] {
                folders.push(python.join(packages).join("nvidia/cu13/lib"));
            }
        }
    }
    folders
}

/// The loaded NVRTC's version, e.g. (13, 0).
pub fn version() -> Result<(i32, i32), NvrtcError> {
    available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

/// An NVRTC program, destroyed by its owner on every path.
struct Program(sys::nvrtcProgram);

impl Program {
    fn new(kernel: &Kernel) -> Result<Program, NvrtcError> {
        let src = CString::new(kernel.source.as_bytes()).expect("generated source has no NUL");
        let name = CString::new(kernel.file_name.as_bytes()).expect("file names have no NUL");
        Ok(Program(result::create_program(&src, Some(&name))?))
    }

    /// Compiles with `options`; Err carries the log.
    fn compile(&self, options: &[String]) -> (Result<(), result::NvrtcError>, String) {
        // SAFETY: self.0 is a live program; the log is read after compiling.
        let compiled = unsafe { result::compile_program(self.0, options) };
        let log = unsafe { result::get_program_log(self.0) }
            .map(|raw| unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned())
            .unwrap_or_default();
        (compiled, log)
    }

    fn cubin(&self) -> Result<Vec<u8>, NvrtcError> {
        let mut size = 0usize;
        // SAFETY: a successfully compiled, live program; the buffer has the size NVRTC reports.
        unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) }.result()?;
        let mut bytes = vec![0u8; size];
        unsafe { sys::nvrtcGetCUBIN(self.0, bytes.as_mut_ptr().cast()) }.result()?;
        Ok(bytes)
    }

    fn ptx(&self) -> Result<String, NvrtcError> {
        // SAFETY: a successfully compiled, live program.
        let ptx = unsafe { result::get_ptx(self.0) }?;
        Ok(unsafe { CStr::from_ptr(ptx.as_ptr()) }.to_string_lossy().into_owned())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program is live and dropped once.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn options(arch: &str) -> Vec<String> {
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    options
}

/// Compiles `kernel` for `arch` (`sm_90`), with the resource report.
pub fn compile(kernel: &Kernel, arch: &str) -> Result<Compiled, NvrtcError> {
    available()?;
    let mut options = options(arch);
    options.push("--ptxas-options=-v".to_owned());
    let program = Program::new(kernel)?;
    let (compiled, log) = program.compile(&options);
    if compiled.is_err() {
        let excerpt = kernel.excerpt(&log);
        return Err(CompileError { file: kernel.file_name.clone(), options, log, excerpt }.into());
    }
    let cubin = program.cubin()?;
    let (registers, spill_bytes) = resources(&log);
    Ok(Compiled { arch: arch.to_owned(), cubin, log, registers, spill_bytes })
}

static CUBINS: Memo<Vec<u8>> = Memo::new();

/// NVRTC's CUBIN for `kernel`, compiled once per source, architecture, NVRTC
/// version and options: from this process, else from `cache`, else compiled.
/// Returns the CUBIN and whether it came from a cache.
pub fn cubin(kernel: &Kernel, arch: &str, cache: &Cache) -> Result<(Arc<Vec<u8>>, bool), NvrtcError> {
    let (major, minor) = version()?;
    let options = options(arch).join(" ");
    let nvrtc = format!("{major}.{minor}");
    let key = Key::of(&[kernel.cache_text().as_bytes(), arch.as_bytes(), nvrtc.as_bytes(), options.as_bytes()]);
    let mut cached = true;
    let bytes = CUBINS.get_or_try(key, || -> Result<Vec<u8>, NvrtcError> {
        let entry = cache.entry("cuda", kernel.file_name.trim_end_matches(".cu"), key, "cubin")?;
        // Only a CUBIN whose bytes are those recorded when it was built is loaded.
        if let Ok(bytes) = entry.read() {
            return Ok(bytes);
        }
        cached = false;
        let compiled = compile(kernel, arch)?;
        entry.write(&compiled.cubin)?;
        Ok(compiled.cubin)
    })?;
    Ok((bytes, cached))
}

/// PTX arithmetic instructions on f32 or f64 in a probe kernel
/// ([`crate::codegen::render_probe`]), compiled for `compute_XY`: an estimate
/// of the floating-point work of one pair (SASS expands sqrt and division further).
pub fn fp_instructions(probe: &Kernel, arch: &str) -> Result<u32, NvrtcError> {
    // Once per process for one probe: a trajectory's frames ask it each.
    static COUNTED: crate::cache::Memo<u32> = crate::cache::Memo::new();
    let key = crate::cache::Key::of(&[probe.cache_text().as_bytes(), arch.as_bytes()]);
    COUNTED.get_or_try(key, || count_fp_instructions(probe, arch)).map(|n| *n)
}

fn count_fp_instructions(probe: &Kernel, arch: &str) -> Result<u32, NvrtcError> {
    available()?;
    let program = Program::new(probe)?;
    let options = options(&arch.replace("sm_", "compute_"));
    let (compiled, log) = program.compile(&options);
    if compiled.is_err() {
        let excerpt = probe.excerpt(&log);
        return Err(CompileError { file: probe.file_name.clone(), options, log, excerpt }.into());
    }
    let text = program.ptx()?;
    const OPS: [&str; 16] = [
        "add", "sub", "mul", "fma", "div", "sqrt", "rsqrt", "rcp", "ex2", "lg2", "sin", "cos", "abs", "neg", "min",
        "max",
    ];
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|op| (op.ends_with(".f32") || op.ends_with(".f64")) && OPS.iter().any(|o| op.starts_with(o)))
        .count() as u32)
}

/// Registers and spill bytes from ptxas's `-v` report.
fn resources(log: &str) -> (Option<u32>, u32) {
    let number_before = |line: &str, word: &str| -> Option<u32> {
        let at = line.find(word)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    let mut registers = None;
    let mut spills = 0;
    for line in log.lines() {
        if let Some(r) = number_before(line, "registers") {
            registers = Some(r);
        }
        spills += number_before(line, "bytes spill stores").unwrap_or(0);
    }
    (registers, spills)
}
