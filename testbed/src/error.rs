//! The one error type of the testbed: each message names what failed and how to fix it.

use std::fmt;

use polld_dev::netns::NetnsError;

/// Why a testbed operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestbedError {
    /// Namespaces, veths and sysfs writes need CAP_NET_ADMIN and CAP_SYS_ADMIN.
    NotRoot,
    /// A program the testbed runs is not installed.
    MissingTool { program: String, package: String },
    /// `up` found namespaces of this layout already present.
    AlreadyExists {
        namespaces: Vec<String>,
        prefix: String,
    },
    /// A CPU that this process may not run on (or that does not exist) was asked for.
    InvalidCpu(String),
    /// A namespace prefix that cannot be part of a namespace name.
    InvalidPrefix(String),
    /// A step failed; the message quotes the command or file and the kernel's answer.
    Failed(String),
}

/// The `--prefix P` argument as the user would retype it, empty for the default testbed.
fn prefix_flag(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!(" --prefix {prefix}")
    }
}

impl fmt::Display for TestbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestbedError::NotRoot => f.write_str(
                "polld testbed needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to create network \
                 namespaces): run it with sudo",
            ),
            TestbedError::MissingTool { program, package } => write!(
                f,
                "`{program}` is not installed: install the {package} package \
                 (e.g. `apt-get install {package}`)"
            ),
            TestbedError::AlreadyExists { namespaces, prefix } => {
                let flag = prefix_flag(prefix);
                write!(
                    f,
                    "network namespace(s) {} already exist: a testbed is up, or a crashed run \
                     left it behind; remove it with `polld testbed down{flag}` or recreate it \
                     with `polld testbed up{flag} --force`",
                    namespaces.join(", ")
                )
            }
            TestbedError::InvalidCpu(message)
            | TestbedError::InvalidPrefix(message)
            | TestbedError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for TestbedError {}

impl From<NetnsError> for TestbedError {
    fn from(e: NetnsError) -> TestbedError {
        TestbedError::Failed(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn already_exists_names_the_namespaces_and_both_fixes_with_the_prefix() {
        let message = TestbedError::AlreadyExists {
            namespaces: vec!["t1gen".into(), "t1sink".into()],
            prefix: "t1".into(),
        }
        .to_string();
        assert!(message.contains("t1gen, t1sink"), "{message}");
        assert!(
            message.contains("`polld testbed down --prefix t1`"),
            "{message}"
        );
        assert!(
            message.contains("`polld testbed up --prefix t1 --force`"),
            "{message}"
        );
    }

    #[test]
    fn not_root_says_to_use_sudo() {
        assert!(TestbedError::NotRoot
            .to_string()
            .contains("run it with sudo"));
    }
}
