//! Which variables a spec's `env:` may not hand a stdio MCP server unless the command line
//! names them (`--allow-env`): shared by the run, which refuses them, and `check`, which warns.

/// Variables that choose what code a program runs, or where it finds it: the dynamic loader's,
/// interpreters' and package managers' (their options, module paths, startup files, indexes),
/// shells' startup files and functions, the search path and the folders configuration is read
/// from. Compared without case (npm reads `npm_config_*` in either).
const CHOOSES_CODE: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "ZDOTDIR",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "SSH_ASKPASS",
    "GCONV_PATH",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "VIRTUAL_ENV",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "TCLLIBPATH",
    "GOFLAGS",
    "GOROOT",
    "GOPATH",
    "GOPROXY",
    "GOTOOLCHAIN",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTFLAGS",
    "RUSTUP_TOOLCHAIN",
    "GTK_MODULES",
    "QT_PLUGIN_PATH",
];

/// Prefixes of such variables: whole families (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`, ...).
const CHOOSES_CODE_PREFIX: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "PYTHON",
    "PIP_",
    "UV_",
    "NPM_CONFIG_",
    "YARN_",
    "PERL",
    "RUBY",
    "GEM_",
    "BUNDLE_",
    "LUA_",
    "GIT_",
    "CARGO_",
    "DOTNET_",
    "COMPLUS_",
    "CORECLR_",
];

/// `PYTHON*` variables that only tune the interpreter (buffering, encoding of the standard
/// streams, bytecode files, hash seed): they load nothing.
const PYTHON_TUNING: &[&str] = &[
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUTF8",
    "PYTHONHASHSEED",
    "PYTHONFAULTHANDLER",
];

/// Whether setting `name` can make the allowed program run other code than its own.
pub(crate) fn chooses_code(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if PYTHON_TUNING.contains(&upper.as_str()) {
        return false;
    }
    CHOOSES_CODE.contains(&upper.as_str())
        || CHOOSES_CODE_PREFIX.iter().any(|p| upper.starts_with(p))
}
