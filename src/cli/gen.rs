//! `twobs gen`: the CUDA kernel of a problem's plan, printed or written, and
//! with `--check` compiled by NVRTC.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{DEFAULT_POINTS, Planned, Target};
use crate::backend::cuda::nvrtc;
use crate::codegen::{self, Kernel};
use crate::device::Device;
use crate::spec::Problem;

pub(super) fn gen_command(
    target: &Target,
    out_dir: Option<PathBuf>,
    check: bool,
    cubin: Option<PathBuf>,
) -> anyhow::Result<()> {
    let p = target.plan()?;
    let cmd = target.command_line(&p.problem, &p.device);
    let kernel = codegen::render(&p.problem, &p.params, &p.plan, &p.device, &cmd);
    match out_dir {
        Some(dir) => write_kernel(&kernel, &dir, &p)?,
        None if check => {}
        None => crate::write::print(&kernel.source)?,
    }
    if check {
        compile_kernel(&kernel, &p, cubin.as_deref())?;
    }
    Ok(())
}

/// Writes DIR/<problem>.cu, replacing only a kernel twobs wrote.
fn write_kernel(kernel: &Kernel, dir: &Path, p: &Planned) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(&kernel.file_name);
    // Only a kernel twobs wrote may be replaced: the spec's own snippet
    // often has the kernel's name (manhattan.cu beside manhattan.xml).
    if let Ok(existing) = std::fs::read_to_string(&path)
        && !existing.starts_with(codegen::KERNEL_FIRST_LINE)
    {
        anyhow::bail!(
            "{} exists and twobs did not write it (it does not start with `{}`); write the kernel elsewhere with -o",
            path.display(),
            codegen::KERNEL_FIRST_LINE
        );
    }
    crate::write::file_atomically(&path, |w| w.write_all(kernel.source.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("wrote {} ({}, {} lines)", path.display(), p.plan.variant, kernel.source.lines().count());
    Ok(())
}

/// `--check`: NVRTC's registers and spills, and with `--cubin` its CUBIN.
fn compile_kernel(kernel: &Kernel, p: &Planned, cubin: Option<&Path>) -> anyhow::Result<()> {
    let compiled = nvrtc::compile(kernel, &p.device.arch())?;
    eprintln!(
        "compiled {} for {}: {} registers, {} bytes spilled, {} B cubin",
        kernel.file_name,
        compiled.arch,
        compiled.registers.map_or("?".to_owned(), |r| r.to_string()),
        compiled.spill_bytes,
        compiled.cubin.len()
    );
    if std::env::var_os("TWOBS_SHOW_LOG").is_some() {
        eprintln!("{}", compiled.log);
    }
    if let Some(path) = cubin {
        // Made exclusively: never a file that exists, nor through a (dangling) link.
        let file = crate::write::create_exclusive(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                anyhow::anyhow!("{} exists; twobs does not overwrite a file it did not write", path.display())
            }
            _ => anyhow::anyhow!("cannot write {}: {e}", path.display()),
        })?;
        // The file is ours (made just now): a failed write removes it.
        std::io::Write::write_all(&mut &file, &compiled.cubin)
            .inspect_err(|_| drop(std::fs::remove_file(path)))
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

// Only `gen` writes the command into a kernel's header, so it lives here.
impl Target {
    /// The command that regenerates this kernel, for its header.
    fn command_line(&self, problem: &Problem, device: &Device) -> String {
        let points = (self.points != DEFAULT_POINTS).then_some(self.points.as_str());
        let command = codegen::regenerate_command(problem, device, points, &self.params, self.forced.forced());
        if self.grid { command + " --grid" } else { command }
    }
}
