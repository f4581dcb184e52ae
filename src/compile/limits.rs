//! `limits:`: the bounds of one run, with their defaults.

use super::Ctx;
use crate::codes::Code;
use crate::diag::Diagnostic;
use crate::registry::Limits;
use crate::specfile::keys;
use crate::specfile::read::{Obj, Spanned};
use crate::specfile::yaml::Node;
use std::time::Duration;

pub(super) fn compile_limits(node: Option<&Node>, ctx: &mut Ctx) -> Limits {
    let mut limits = Limits {
        max_steps: 10,
        max_tool_calls: 20,
        max_parallel_tools: 4,
        tool_timeout: Duration::from_secs(30),
        run_timeout: Duration::from_secs(300),
        max_tool_output_chars: 16_000,
        max_tokens_total: None,
        max_cost_usd: None,
    };
    let Some(node) = node else { return limits };
    let Some(obj) = Obj::new(node, "`limits`", keys::LIMITS, &mut ctx.d) else {
        return limits;
    };
    let d = &mut ctx.d;
    let small = |v: Spanned<u64>| v.value.min(u32::MAX as u64) as u32;
    if let Some(v) = obj.count("max_steps", 1, d) {
        limits.max_steps = small(v);
    }
    let tool_calls = obj.count("max_tool_calls", 1, d);
    if let Some(v) = &tool_calls {
        limits.max_tool_calls = small(v.clone());
    }
    if let Some(v) = obj.count("max_parallel_tools", 1, d) {
        limits.max_parallel_tools = small(v.clone());
        if limits.max_parallel_tools > limits.max_tool_calls {
            d.push(
                Diagnostic::new(
                    Code::E023,
                    format!(
                        "`max_parallel_tools` ({}) is larger than `max_tool_calls` ({})",
                        limits.max_parallel_tools, limits.max_tool_calls
                    ),
                )
                .at(v.span)
                .help("lower `max_parallel_tools` or raise `max_tool_calls`"),
            );
        }
    }
    if let Some(v) = obj.duration("tool_timeout", d) {
        limits.tool_timeout = v.value;
    }
    if let Some(v) = obj.duration("run_timeout", d) {
        limits.run_timeout = v.value;
        if limits.tool_timeout > limits.run_timeout {
            d.push(
                Diagnostic::new(Code::E023, "`tool_timeout` is longer than `run_timeout`")
                    .at(v.span)
                    .help("a tool can never use its whole timeout; lower `tool_timeout` or raise `run_timeout`"),
            );
        }
    }
    if let Some(v) = obj.count("max_tool_output_chars", 16, d) {
        limits.max_tool_output_chars = v.value as usize;
    }
    if let Some(v) = obj.count("max_tokens_total", 1, d) {
        limits.max_tokens_total = Some(v.value);
    }
    limits
}
