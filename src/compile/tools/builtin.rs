//! `kind: builtin`: one of the built-in tools, its schema fixed by the tool.

use super::KindParts;
use crate::codes::Code;
use crate::compile::Ctx;
use crate::diag::{Diagnostic, Span};
use crate::registry::ToolKind;
use crate::specfile::read::Obj;

pub(super) fn compile_builtin(
    obj: &Obj,
    what: &str,
    name_span: Span,
    ctx: &mut Ctx,
) -> Option<KindParts> {
    let names: Vec<&str> = crate::builtins::all().iter().map(|i| i.name).collect();
    if !obj.has("builtin") {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "builtin", what)
                .help(format!("add `builtin:` with one of {}", names.join(", "))),
        );
        return None;
    }
    let b = obj.string("builtin", &mut ctx.d)?;
    let Some(info) = crate::builtins::find(&b.value) else {
        ctx.d.push(
            Diagnostic::new(Code::E026, format!("unknown builtin `{}`", b.value))
                .at(b.span)
                .help(crate::diag::choose(&b.value, names.iter().copied())),
        );
        return None;
    };
    Some(KindParts {
        schema: (info.input_schema)(),
        kind: ToolKind::Builtin(info.name),
        idempotent: true,
        prebuilt: None,
    })
}
