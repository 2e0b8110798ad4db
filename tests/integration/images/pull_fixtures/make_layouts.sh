#!/bin/sh
# Writes an OCI image layout at $1 with three references:
#   amd    linux/amd64 image: /bin/busybox, /hello.txt = "hello amd64"
#   arm    linux/arm64 image: /hello.txt = "hello arm64"
#   multi  an image index of both, with their platforms
set -eu
out=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/amd/bin" "$work/arm"
cp /bin/busybox "$work/amd/bin/busybox"
echo "hello amd64" > "$work/amd/hello.txt"
echo "hello arm64" > "$work/arm/hello.txt"
umoci init --layout "$out"
umoci new --image "$out:amd"
umoci config --image "$out:amd" --os linux --architecture amd64 --config.cmd /bin/busybox
umoci insert --rootless --image "$out:amd" "$work/amd" /
umoci new --image "$out:arm"
umoci config --image "$out:arm" --os linux --architecture arm64
umoci insert --rootless --image "$out:arm" "$work/arm" /
python3 - "$out" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
index_path = os.path.join(out, "index.json")
index = json.load(open(index_path))
by_ref = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in index["manifests"]}
def entry(ref, arch):
    m = dict(by_ref[ref]); m.pop("annotations", None)
    m["platform"] = {"os": "linux", "architecture": arch}
    return m
multi = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [entry("arm", "arm64"), entry("amd", "amd64")]}
blob = json.dumps(multi).encode()
digest = hashlib.sha256(blob).hexdigest()
open(os.path.join(out, "blobs", "sha256", digest), "wb").write(blob)
index["manifests"].append({"mediaType": multi["mediaType"], "digest": "sha256:" + digest, "size": len(blob),
                           "annotations": {"org.opencontainers.image.ref.name": "multi"}})
json.dump(index, open(index_path, "w"))
PY
