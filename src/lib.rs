//! twobs: 2-body statistics on GPUs, from an XML problem spec and a CUDA
//! pair function to a planned, generated and compiled kernel.
//!
//! Data flows one way: [`spec`] (XML -> Problem) -> [`plan`] (Problem +
//! Device -> Plan, with [`model`]) -> [`codegen`] (Plan -> CUDA source) ->
//! [`backend`] (NVRTC, the GPU).

pub mod backend;
pub mod cli;
pub mod codegen;
pub mod data;
pub mod device;
pub mod model;
pub mod outcome;
pub mod plan;
pub mod problems;
pub mod report;
pub mod run;
pub mod spec;
pub mod verify;
