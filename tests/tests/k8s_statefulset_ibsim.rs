//! deploy/k8s forms a replicated cluster as shipped (issue 13, item 6):
//!
//! the manifests are rendered exactly as `kubectl apply -k deploy/k8s` would render
//! them (`kubectl kustomize`, no cluster needed), and for each StatefulSet ordinal the
//! test derives what Kubernetes would run in that pod: the image's ENTRYPOINT (read
//! from deploy/container/Containerfile) with the container's args after Kubernetes'
//! `$(VAR)` expansion, the env with its downward-API fields (`metadata.name` is the
//! pod name `ibsmd-N`, `status.podIP` the pod's address), the ConfigMap's file and the
//! Secret's keys at their mount paths. Three ibsmd start with exactly that on three
//! HCAs of ibsim and must form one Raft cluster (three voters, one leader agreed by
//! all) with one MASTER.
//!
//! What stands in for the cluster, and why: each pod is on its own host with
//! hostNetwork, so its address is 127.77.0.(N+1) here (all of 127/8 is loopback);
//! cluster DNS is the test resolving the peers' names
//! (`<pod>.<serviceName>.<namespace>.svc.cluster.local`, built from the rendered
//! StatefulSet and headless Service) to those addresses, the only change made to the
//! ConfigMap's text besides mount paths; a mount is its mountPath re-rooted into the
//! pod's scratch dir (the config's paths and the args are rewritten by that prefix);
//! the Secret's placeholder values are replaced by generated ones, as deploy/README.md
//! tells the operator to; `/dev/infiniband` is the HCA through umad2sim (LD_PRELOAD,
//! SIM_HOST).
//!
//! Fails (never skips) when kubectl or the lab tools are missing (tests/setup.sh).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ibsm_integration::{binary, ctl_json_of, run_ok, wait_log};
use ibsm_labkit::{require_tool, ChildGuard, Ibsim, IbsimOptions};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(90);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl kustomize deploy/k8s`, every document as JSON.
fn render() -> Result<Vec<Value>> {
    let kubectl = require_tool("kubectl")
        .context("kubectl renders the manifests (kubectl kustomize); tests/setup.sh installs it")?;
    let yaml = run_ok(
        Command::new(kubectl)
            .arg("kustomize")
            .arg(repo().join("deploy/k8s")),
        Duration::from_secs(60),
    )?;
    let mut docs = Vec::new();
    // kustomize separates the documents with `---` lines.
    for (i, doc) in format!("\n{yaml}").split("\n---\n").enumerate() {
        let v: Value =
            serde_yaml_ng::from_str(doc).with_context(|| format!("rendered YAML document {i}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name} in the rendered manifests"))
}

fn str_of<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    v.as_str()
        .with_context(|| format!("{what} is not a string: {v}"))
}

/// Kubernetes' expansion of `$(VAR)` in command and args: defined variables are
/// replaced, `$$` is a literal `$`, anything else is left as written.
fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("$$") {
            out.push('$');
            rest = t;
        } else if let Some((name, after)) = tail
            .strip_prefix("$(")
            .and_then(|t| t.split_once(')'))
            .filter(|(n, _)| env.contains_key(*n))
        {
            out.push_str(&env[name]);
            rest = after;
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The image's ENTRYPOINT, from the Containerfile's exec-form line.
fn image_entrypoint() -> Result<Vec<String>> {
    let file = std::fs::read_to_string(repo().join("deploy/container/Containerfile"))?;
    let line = file
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .context("no ENTRYPOINT in the Containerfile")?;
    serde_json::from_str(line).context("ENTRYPOINT is not exec form")
}

/// One pod as the test runs it.
struct Pod {
    name: String,
    ip: String,
    proc: ChildGuard,
    log: PathBuf,
}

#[test]
fn k8s_statefulset_forms_a_replicated_cluster_on_ibsim() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let docs = render()?;
    let sts = find(&docs, "StatefulSet", "ibsmd")?;
    let ns = str_of(&sts["metadata"]["namespace"], "namespace")?;
    let service_name = str_of(&sts["spec"]["serviceName"], "serviceName")?;
    let peers_svc = find(&docs, "Service", service_name)?;
    ensure!(
        peers_svc["spec"]["clusterIP"] == "None",
        "the StatefulSet's service {service_name} is not headless"
    );
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    for (k, v) in peers_svc["spec"]["selector"]
        .as_object()
        .context("peer Service selector")?
    {
        ensure!(
            &labels[k] == v,
            "{service_name} does not select the pods ({k})"
        );
    }
    let replicas = sts["spec"]["replicas"].as_u64().context("replicas")?;
    ensure!(
        replicas == 3,
        "replicas = {replicas}; the test runs 3 members"
    );
    let pod_spec = &sts["spec"]["template"]["spec"];
    ensure!(pod_spec["hostNetwork"] == true, "hostNetwork");
    let containers = pod_spec["containers"].as_array().context("containers")?;
    ensure!(containers.len() == 1, "one container");
    let c = &containers[0];
    ensure!(
        c["command"].is_null(),
        "the pod overrides the image's entrypoint"
    );
    let entrypoint = image_entrypoint()?;
    ensure!(
        entrypoint == ["/usr/bin/ibsmd"],
        "image entrypoint {entrypoint:?}"
    );
    let volumes: BTreeMap<&str, &Value> = pod_spec["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .map(|v| Ok((str_of(&v["name"], "volume name")?, v)))
        .collect::<Result<_>>()?;

    // The operator's secrets, in place of the placeholders.
    let secret_values: BTreeMap<&str, &str> = [
        ("token", "k8s-test-token-0123456789abcdef"),
        ("cluster-secret", "k8s-test-cluster-secret-fedcba9876543210"),
    ]
    .into();

    let ibsmd = binary("ibsmd")?;
    let ibsmctl = binary("ibsmctl")?;
    let work = tempfile::tempdir()?;
    let sim = Ibsim::start(
        &ibsm_labkit::example_net("net.2sw2path4hca")?,
        IbsimOptions::default(),
    )?;
    let pod_names: Vec<String> = (0..replicas).map(|n| format!("ibsmd-{n}")).collect();
    let pod_ips: Vec<String> = (0..replicas)
        .map(|n| format!("127.77.0.{}", n + 1))
        .collect();
    // Free ports first: a clear message rather than a member that cannot bind.
    for ip in &pod_ips {
        for port in c["ports"].as_array().context("ports")? {
            let p = port["containerPort"].as_u64().context("containerPort")?;
            std::net::TcpListener::bind(format!("{ip}:{p}"))
                .with_context(|| format!("{ip}:{p} is in use by another process"))?;
        }
    }

    let mut pods = Vec::new();
    for (n, (name, ip)) in pod_names.iter().zip(&pod_ips).enumerate() {
        let root = work.path().join(name);
        // Env, downward API resolved for this pod.
        let mut env = BTreeMap::new();
        for e in c["env"].as_array().context("env")? {
            let k = str_of(&e["name"], "env name")?.to_string();
            let v = if let Some(v) = e["value"].as_str() {
                v.to_string()
            } else {
                match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    Some("metadata.name") => name.clone(),
                    Some("metadata.namespace") => ns.to_string(),
                    Some("status.podIP") => ip.clone(),
                    other => bail!("env {k}: valueFrom {other:?} is not emulated"),
                }
            };
            env.insert(k, v);
        }
        // Mounts.
        let mut mounts: Vec<(String, PathBuf)> = Vec::new();
        for m in c["volumeMounts"].as_array().context("volumeMounts")? {
            let mount_path = str_of(&m["mountPath"], "mountPath")?;
            let vol = volumes
                .get(str_of(&m["name"], "mount name")?)
                .context("mount of an undeclared volume")?;
            let host = root.join(mount_path.trim_start_matches('/'));
            if let Some(cm) = vol["configMap"]["name"].as_str() {
                let data = &find(&docs, "ConfigMap", cm)?["data"];
                let key = str_of(&m["subPath"], "configMap subPath")?;
                let mut text = str_of(&data[key], "ConfigMap data")?.to_string();
                // Cluster DNS: the peers' stable names -> their pods' addresses.
                for (pn, pip) in pod_names.iter().zip(&pod_ips) {
                    text = text.replace(
                        &format!("{pn}.{service_name}.{ns}.svc.cluster.local:"),
                        &format!("{pip}:"),
                    );
                }
                std::fs::create_dir_all(host.parent().context("mount parent")?)?;
                std::fs::write(&host, text)?;
            } else if let Some(s) = vol["secret"]["secretName"].as_str() {
                let secret = find(&docs, "Secret", s)?;
                std::fs::create_dir_all(&host)?;
                let keys = secret["stringData"].as_object().context("stringData")?;
                for k in keys.keys() {
                    let v = secret_values
                        .get(k.as_str())
                        .with_context(|| format!("Secret {s} key {k}: no test value"))?;
                    let f = host.join(k);
                    std::fs::write(&f, format!("{v}\n"))?;
                    let mode = vol["secret"]["defaultMode"].as_u64().unwrap_or(0o644) as u32;
                    std::fs::set_permissions(
                        &f,
                        std::os::unix::fs::PermissionsExt::from_mode(mode),
                    )?;
                }
            } else if vol["hostPath"]["path"] == "/dev/infiniband" {
                // The HCA is ibsim's, through umad2sim.
                continue;
            } else if vol["hostPath"].is_object() {
                std::fs::create_dir_all(&host)?;
            } else {
                bail!("volume {vol} is not emulated");
            }
            mounts.push((mount_path.to_string(), host));
        }
        let remap = |s: &str| -> String {
            for (mp, host) in &mounts {
                if let Some(rest) = s.strip_prefix(mp.as_str()) {
                    return format!("{}{rest}", host.display());
                }
            }
            s.to_string()
        };
        // The mounted config's own paths point into the mounts too.
        for (mp, host) in &mounts {
            if host.is_file() {
                let mut text = std::fs::read_to_string(host)?;
                for (mp2, host2) in &mounts {
                    text = text.replace(&format!("\"{mp2}"), &format!("\"{}", host2.display()));
                }
                std::fs::write(host, text)?;
                eprintln!("{name}: {mp} =\n{}", std::fs::read_to_string(host)?);
            }
        }
        let args: Vec<String> = c["args"]
            .as_array()
            .context("args")?
            .iter()
            .map(|a| Ok(remap(&expand(str_of(a, "arg")?, &env))))
            .collect::<Result<_>>()?;
        eprintln!("{name}: {entrypoint:?} {args:?} env {env:?}");
        let log = work.path().join(format!("{name}.log"));
        let host = format!("Hca{}", n + 1);
        let mut cmd = sim.command_on(&host, &ibsmd);
        cmd.args(&args)
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log)?));
        let proc = sim.spawn(&mut cmd)?;
        pods.push(Pod {
            name: name.clone(),
            ip: ip.clone(),
            proc,
            log,
        });
    }
    let token = work.path().join("ibsmd-0/etc/ibsm/secret/token");
    let ctl = |pod: &Pod, what: &str| -> Result<Value> {
        let out = ibsm_labkit::run_with_timeout(
            Command::new(&ibsmctl)
                .args(["--json", "--endpoint", &format!("http://{}:50051", pod.ip)])
                .arg("--token-file")
                .arg(&token)
                .arg(what),
            Duration::from_secs(10),
        )?;
        ctl_json_of(&format!("{what} on {}", pod.name), &out)
    };
    for p in &pods {
        wait_log(&p.log, "gRPC control API listening", TIMEOUT)
            .with_context(|| format!("{} did not serve its API", p.name))?;
    }
    // One Raft cluster of three voters, every member agreeing on the leader, and one
    // MASTER that is not degraded.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut last = Vec::new();
        let mut ok = true;
        let mut leaders = std::collections::BTreeSet::new();
        for p in pods.iter_mut() {
            ensure!(
                p.proc.try_wait()?.is_none(),
                "{} exited:\n{}",
                p.name,
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
        }
        for (i, p) in pods.iter().enumerate() {
            match ctl(p, "members") {
                Ok(m) => {
                    let members = m["members"].as_array().cloned().unwrap_or_default();
                    let voters = members.iter().filter(|x| x["voter"] == true).count();
                    ok &= m["node_id"] == (i as u64 + 1) && voters == 3 && m["leader"] != 0;
                    leaders.insert(m["leader"].to_string());
                    last.push(m);
                }
                Err(e) => {
                    ok = false;
                    last.push(Value::String(format!("{e:#}")));
                }
            }
        }
        let states: Vec<Value> = pods
            .iter()
            .map(|p| ctl(p, "status").unwrap_or(Value::Null))
            .collect();
        let masters = states.iter().filter(|s| s["state"] == "MASTER").count();
        let healthy = states.iter().all(|s| s["degraded"] == false);
        if ok && leaders.len() == 1 && masters == 1 && healthy {
            eprintln!("members: {}", last[0]);
            for (p, s) in pods.iter().zip(&states) {
                eprintln!(
                    "{}: {} epoch {} raft {}",
                    p.name, s["state"], s["epoch"], s["raft_role"]
                );
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            let logs: String = pods
                .iter()
                .map(|p| {
                    format!(
                        "--- {}\n{}\n",
                        p.name,
                        std::fs::read_to_string(&p.log).unwrap_or_default()
                    )
                })
                .collect();
            bail!("no replicated cluster of 3 with one master: members {last:?} states {states:?}\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn kubernetes_var_expansion_follows_the_api_rules() {
    let env: BTreeMap<String, String> = [("POD_NAME".to_string(), "ibsmd-2".to_string())].into();
    assert_eq!(
        expand("/var/lib/ibsm/$(POD_NAME)", &env),
        "/var/lib/ibsm/ibsmd-2"
    );
    assert_eq!(expand("$$(POD_NAME)", &env), "$(POD_NAME)");
    assert_eq!(expand("$(UNSET) $", &env), "$(UNSET) $");
}
