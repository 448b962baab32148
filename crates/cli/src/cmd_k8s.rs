//! `proxybench k8s`: the Kubernetes chores around runs. `clean` deletes what runs left behind
//! (a run killed with SIGKILL cannot delete its own objects), found by their
//! `app.kubernetes.io/managed-by=proxybench` label; `rbac` prints the permissions a run needs.

use crate::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `proxybench k8s`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: K8sCmd,
}

#[derive(clap::Subcommand)]
enum K8sCmd {
    /// Delete what proxybench runs left on a cluster: the namespaces runs made, whole, and the
    /// labelled objects of runs in namespaces they did not make.
    Clean(CleanArgs),
    /// Print the RBAC objects a run needs, as YAML to apply: a Role and RoleBinding in one
    /// namespace (runs with --namespace), else a ClusterRole and ClusterRoleBinding (runs that
    /// make their own namespace). With --scenario, also what that scenario does elsewhere: a
    /// Role and RoleBinding in each other namespace it names, with only what it does there, the
    /// kinds its manifests name, and a ClusterRole for cluster-scoped kinds.
    Rbac(RbacArgs),
}

/// Flags of `proxybench k8s rbac`.
#[derive(clap::Args)]
struct RbacArgs {
    /// The namespace runs will use (--namespace): a Role there; without it, a ClusterRole.
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// The ServiceAccount the binding names, `NAME` (in --namespace, else `default`) or
    /// `NS/NAME`.
    #[arg(long, value_name = "[NS/]NAME", default_value = "proxybench")]
    service_account: String,
    /// A scenario (a file or a built-in name), parsed as `check --platform kubernetes` parses
    /// it: add what its actions, probes, collectors, loads' Gateways and manifests (apply and
    /// delete files, `.j2` templates, growth templates and generators) need, per namespace,
    /// each rule naming the case and action that needs it.
    #[arg(long, value_name = "FILE|NAME")]
    scenario: Option<String>,
}

/// Flags of `proxybench k8s clean`.
#[derive(clap::Args)]
struct CleanArgs {
    /// Only what was created at least this long ago, so that a run still going keeps its objects.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    older_than: units::Dur,
    /// Only in this namespace (a user limited to one; the namespace itself goes only if a run
    /// made it).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// List what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// The kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

/// Runs `proxybench k8s ...`.
pub fn main(args: Args) -> Result<ExitCode, CliError> {
    match args.cmd {
        K8sCmd::Clean(a) => clean(a),
        K8sCmd::Rbac(a) => rbac(a),
    }
}

fn rbac(a: RbacArgs) -> Result<ExitCode, CliError> {
    let (ns, name) = match a.service_account.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (
            a.namespace.clone().unwrap_or_else(|| "default".into()),
            a.service_account.clone(),
        ),
    };
    for (what, v) in [
        ("--namespace", a.namespace.as_deref()),
        ("--service-account namespace", Some(ns.as_str())),
        ("--service-account", Some(name.as_str())),
    ] {
        if let Some(v) = v {
            if !valid_name(v) {
                return Err(CliError::usage(format!(
                    "{what} '{v}': must be 1-63 lowercase letters, digits or '-', starting and \
                     ending with a letter or digit"
                )));
            }
        }
    }
    let Some(file) = &a.scenario else {
        print!("{}", k8s::rbac(a.namespace.as_deref(), &ns, &name));
        return Ok(ExitCode::SUCCESS);
    };
    let opts = scenario::ParseOptions {
        platform: scenario::PlatformOverride {
            kind: Some(scenario::PlatformKind::Kubernetes),
            namespace: a.namespace.clone(),
            ..scenario::PlatformOverride::default()
        },
        skip_file_checks: false,
        templates: Some(&manifests::CHECK),
        ..analysis::parse_options()
    };
    // The full form: the --quick form's actions are the same, fewer or shorter.
    let scn = crate::cmd_run::load_scenario(file, false, &opts)?;
    // The run's namespace: --namespace, else the scenario's own [platform] namespace.
    let run_ns = a
        .namespace
        .clone()
        .or_else(|| scn.platform.namespace.clone());
    let needs = bench::rbac::needs(&scn, run_ns.as_deref())
        .map_err(|e| CliError::usage(format!("{}: {e}", scn.file)))?;
    print!("{}", k8s::rbac_for(&needs, &ns, &name));
    Ok(ExitCode::SUCCESS)
}

/// A DNS-1123 label (namespaces, ServiceAccounts).
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn clean(a: CleanArgs) -> Result<ExitCode, CliError> {
    let cluster = k8s::Cluster::connect(a.kubeconfig.as_deref(), a.context.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    let scope = k8s::CleanScope {
        namespace: a.namespace,
        older_than: a.older_than.0,
        dry_run: a.dry_run,
    };
    let done = cluster
        .clean(&scope)
        .map_err(|e| CliError::runtime(e.to_string()))?;
    let verb = if a.dry_run { "would delete" } else { "deleted" };
    for d in &done {
        println!("{verb} {d}");
    }
    if done.is_empty() {
        println!(
            "nothing to clean: no object labelled app.kubernetes.io/managed-by=proxybench older \
             than {}",
            a.older_than
        );
    }
    Ok(ExitCode::SUCCESS)
}
