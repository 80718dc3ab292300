//! NVRTC through cudarc: CUDA source -> CUBIN for one architecture. The same
//! code path serves the runner and the compile tests (NVRTC needs no GPU).

use std::ffi::CStr;

use cudarc::nvrtc::{result, sys};

use crate::codegen::{Kernel, NVRTC_OPTIONS};

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

/// Whether libnvrtc can be loaded, and if not, why.
pub fn available() -> Result<(), String> {
    // SAFETY: only probes whether the shared library can be opened.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err("libnvrtc (CUDA 13) was not found on the library path; install it (`pip install nvidia-cuda-nvrtc==13.0.*`) and add its nvidia/cu13/lib folder to LD_LIBRARY_PATH, as scripts/test.sh does".to_owned())
    }
}

/// The loaded NVRTC's version, e.g. (13, 0).
pub fn version() -> anyhow::Result<(i32, i32)> {
    available().map_err(anyhow::Error::msg)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

/// Compiles `kernel` for `arch` (`sm_90`). A failure carries the log, the options and
/// the generated lines the log points at.
pub fn compile(kernel: &Kernel, arch: &str) -> anyhow::Result<Compiled> {
    available().map_err(anyhow::Error::msg)?;
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    options.push("--ptxas-options=-v".to_owned());
    let src = std::ffi::CString::new(kernel.source.as_bytes())?;
    let name = std::ffi::CString::new(kernel.file_name.as_bytes())?;
    let prog = result::create_program(&src, Some(&name))?;
    // SAFETY: prog was just created and is destroyed once below.
    let compiled = unsafe { result::compile_program(prog, &options) };
    let log = unsafe { result::get_program_log(prog) }
        .map(|raw| unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cubin = compiled.map_err(anyhow::Error::from).and_then(|()| unsafe { cubin(prog) });
    unsafe { result::destroy_program(prog) }?;
    let cubin = cubin.map_err(|e| {
        anyhow::anyhow!(
            "NVRTC could not compile {} ({e}) with options {}:\n{}{}",
            kernel.file_name,
            options.join(" "),
            log.trim_end(),
            excerpt(kernel, &log)
        )
    })?;
    let (registers, spill_bytes) = resources(&log);
    Ok(Compiled { arch: arch.to_owned(), cubin, log, registers, spill_bytes })
}

/// PTX arithmetic instructions on f32 or f64 in a probe kernel
/// ([`crate::codegen::render_probe`]), compiled for `compute_XY`: an estimate
/// of the floating-point work of one pair (SASS expands sqrt and division further).
pub fn fp_instructions(probe: &Kernel, arch: &str) -> anyhow::Result<u32> {
    available().map_err(anyhow::Error::msg)?;
    let src = std::ffi::CString::new(probe.source.as_bytes())?;
    let prog = result::create_program(&src, None)?;
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(format!("--gpu-architecture={}", arch.replace("sm_", "compute_")));
    let ptx = unsafe { result::compile_program(prog, &options) }
        .map_err(anyhow::Error::from)
        .and_then(|()| unsafe { result::get_ptx(prog) }.map_err(anyhow::Error::from));
    unsafe { result::destroy_program(prog) }?;
    let ptx = ptx?;
    let text = unsafe { CStr::from_ptr(ptx.as_ptr()) }.to_string_lossy().into_owned();
    const OPS: [&str; 16] = [
        "add", "sub", "mul", "fma", "div", "sqrt", "rsqrt", "rcp", "ex2", "lg2", "sin", "cos", "abs", "neg", "min",
        "max",
    ];
    Ok(text
        .lines()
        .filter_map(|l| l.trim().split_whitespace().next())
        .filter(|op| (op.ends_with(".f32") || op.ends_with(".f64")) && OPS.iter().any(|o| op.starts_with(o)))
        .count() as u32)
}

/// # Safety
/// `prog` must be a successfully compiled, live program.
unsafe fn cubin(prog: sys::nvrtcProgram) -> anyhow::Result<Vec<u8>> {
    let mut size = 0usize;
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut bytes = vec![0u8; size];
    unsafe { sys::nvrtcGetCUBIN(prog, bytes.as_mut_ptr().cast()) }.result()?;
    Ok(bytes)
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

/// The generated lines around each `file.cu(N)` the log mentions.
fn excerpt(kernel: &Kernel, log: &str) -> String {
    let lines: Vec<&str> = kernel.source.lines().collect();
    let tag = format!("{}(", kernel.file_name);
    let mut out = String::new();
    for at in log.match_indices(&tag).map(|(i, _)| i + tag.len()).take(3) {
        let Some(n) = log[at..].split(')').next().and_then(|s| s.parse::<usize>().ok()) else {
            continue;
        };
        out.push_str(&format!("\n\n{} around line {n}:\n", kernel.file_name));
        for k in n.saturating_sub(3)..(n + 2).min(lines.len()) {
            out.push_str(&format!("{:>5} | {}\n", k + 1, lines[k]));
        }
    }
    out
}
