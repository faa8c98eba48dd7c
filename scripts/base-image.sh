#!/usr/bin/env bash
# Makes a stand-in for python:3.11-slim from Debian bookworm packages, for building the image
# where no container registry is reachable, and prints its name. The slim image's shape:
# python/pip commands in /usr/local/bin, apt with its sources (the WITH_SPARK variant installs
# a JRE), useradd, CA certificates (this host's bundle, so pip in a build trusts the same CAs),
# no EXTERNALLY-MANAGED marker. Imported into buildah's vfs storage as $BASE_IMAGE
# (default localhost/pulsar-lens-base:bookworm).
#
# Cached: an OCI archive under ~/.cache/pulsar-lens/base-image/, keyed by this script's hash;
# a run reuses the image in storage, else reimports the archive, else builds (about a minute).
#   scripts/base-image.sh            # prints the image name
#   DEBIAN_MIRROR=http://... scripts/base-image.sh
set -euo pipefail

name=${BASE_IMAGE:-localhost/pulsar-lens-base:bookworm}
suite=bookworm
script=$(readlink -f "$0")
key=$(sha256sum "$script" | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/pulsar-lens/base-image
archive=$cache/base-$key.tar
buildah=(buildah --storage-driver vfs)
log() { echo "base-image: $*" >&2; }

# The image in storage already comes from this version of the script: nothing to do.
if [ "$("${buildah[@]}" inspect --type image --format '{{index .OCIv1.Config.Labels "org.pulsar-lens.base-key"}}' "$name" 2>/dev/null)" = "$key" ]; then
  echo "$name"
  exit 0
fi

if [ -f "$archive" ]; then
  log "importing $archive"
  id=$("${buildah[@]}" pull -q "oci-archive:$archive")
  "${buildah[@]}" tag "$id" "$name"
  echo "$name"
  exit 0
fi

# The Debian mirror apt already uses here (deb822 URIs: or one-line deb entries).
mirror_from_apt() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  grep -hsE '^[[:space:]]*(URIs:|deb[[:space:]])' "${files[@]}" \
    | grep -oE 'https?://[^[:space:]]+/debian/?([[:space:]]|$)' | head -n1 | tr -d '[:space:]' || true
}
mirror=${DEBIAN_MIRROR:-$(mirror_from_apt)}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
security=${mirror%/debian}/debian-security
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$ca_bundle" ] || { log "no CA bundle at $ca_bundle (set CA_BUNDLE)"; exit 1; }
command -v debootstrap >/dev/null || { log "debootstrap is not installed (scripts/setup.sh)"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pulsar-lens-base.XXXXXX")
ctr=""
cleanup() {
  [ -z "$ctr" ] || "${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
root=$work/rootfs

log "debootstrap $suite from $mirror (about a minute)"
debootstrap --variant=minbase --include=ca-certificates,python3.11,python3-pip,python3-venv \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# apt sources as the slim image has them, so `apt-get update && apt-get install` works inside
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# Debian's pip reads the system bundle; update-ca-certificates (run when a later package such
# as the JRE pulls ca-certificates-java) keeps what /usr/local/share/ca-certificates adds.
cp "$ca_bundle" "$root/usr/local/share/ca-certificates/host-bundle.crt"
cp "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"
# dpkg leaves docs and man pages out of later installs too, as in the slim image
cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
EOF
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip3"
# what the slim image leaves out too: package lists, apt caches, docs, man pages
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log \
  "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
find "$root/usr/lib/python3" "$root/usr/lib/python3.11" -name __pycache__ -prune -exec rm -rf {} +

tar -C "$root" --numeric-owner -cf "$work/rootfs.tar" .
ctr=$("${buildah[@]}" from scratch)
"${buildah[@]}" add "$ctr" "$work/rootfs.tar" / >/dev/null
"${buildah[@]}" config \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --cmd '["python3"]' \
  --label "org.pulsar-lens.base-key=$key" \
  --label "org.opencontainers.image.description=python:3.11-slim stand-in, Debian $suite" \
  "$ctr"
"${buildah[@]}" commit -q --rm "$ctr" "$name" >/dev/null
ctr=""

mkdir -p "$cache"
rm -f "$cache"/base-*.tar
"${buildah[@]}" push -q "$name" "oci-archive:$archive.part" >/dev/null
mv "$archive.part" "$archive"
log "built $name, cached in $archive"
echo "$name"
