//! twobs: 2-body statistics on GPUs, from an XML problem spec and a CUDA
//! pair function to a planned, generated and compiled kernel.
//!
//! Data flows one way, each stage in its own module:
//! [`spec`] (XML -> Problem) -> [`index`] (a cut-off problem's grid over the
//! data) -> [`plan`] (Problem + Device -> Plan, composed
//! from the [`stage`] families with the [`model`]s) -> [`codegen`] (Plan ->
//! CUDA source) -> [`schedule`] (the index, the units and who runs them,
//! decided on the host for described workers) -> [`backend`] (compiled
//! module, run; [`cache`]) ->
//! [`outcome`] -> [`report`] (result files through [`write`]). [`data`]
//! reads and makes the input sets; [`run`] and [`verify`] drive a run; [`cli`]
//! is the command line, the only place errors become `anyhow`.

pub mod backend;
pub mod cache;
pub mod cli;
pub mod codegen;
pub mod corrfunc;
pub mod data;
pub mod device;
pub mod index;
pub mod memory;
pub mod model;
pub mod outcome;
pub mod plan;
pub mod plot;
pub mod problems;
pub mod ranks;
pub mod rdf;
pub mod remedy;
pub mod report;
pub mod request;
pub mod run;
pub mod schedule;
pub mod spec;
pub mod stage;
pub mod stop;
pub mod tune;
pub mod verify;
pub mod write;
pub mod xi;
