# Sourced by benches/fs_cost.sh, cargo_build.sh, workloads.sh, metadata.sh and
# violation_storm.sh: the steps they share. Each sets globals the scripts then use.

# VETTO, built with `cargo build --release` in the repository when unset;
# `repo` and `user` (BENCH_USER, default tester).
bench_vetto() {
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    user=${BENCH_USER:-tester}
    if [[ -z ${VETTO:-} ]]; then
        (cd "$repo" && cargo build --release --quiet)
        VETTO="$repo/target/release/vetto"
    fi
}

bench_need_hyperfine() {
    command -v hyperfine >/dev/null || { echo "needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
}

# scratch: a new directory from the mktemp template $1, removed at exit,
# holding a copy of VETTO as $scratch/vetto.
bench_scratch() {
    scratch=$(mktemp -d "$1")
    trap 'rm -rf "$scratch"' EXIT
    cp "$VETTO" "$scratch/vetto"
}

# as_user: the command prefix that runs as `user` (created when missing)
# when this runs as root, scratch then handed to it; empty otherwise.
bench_as_user() {
    as_user=()
    if [[ $(id -u) == 0 ]]; then
        id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
        chown -R "$user:" "$scratch"
        chmod 755 "$scratch"
        as_user=(runuser -u "$user" --)
    fi
}
