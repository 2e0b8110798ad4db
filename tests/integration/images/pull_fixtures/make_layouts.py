#!/usr/bin/env python3
"""Writes an OCI image layout at argv[1] with three references:
  amd    linux/amd64 image: /bin/busybox (if the host has one), /hello.txt = "hello amd64"
  arm    linux/arm64 image: /hello.txt = "hello arm64"
  multi  an image index of both, with their platforms
Layers are written here (relative entries, as docker/buildkit write them)."""
import gzip, hashlib, io, json, os, sys, tarfile

out = sys.argv[1]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs)


def put(data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, d), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + d, "size": len(data)}


def layer(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        dirs = sorted({os.path.dirname(p) for p in files if os.path.dirname(p)})
        for d in dirs:
            info = tarfile.TarInfo(d + "/")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            t.addfile(info)
        for path, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            t.addfile(info, io.BytesIO(data))
    tar = raw.getvalue()
    return gzip.compress(tar, mtime=0), "sha256:" + hashlib.sha256(tar).hexdigest()


def image(arch, files, cmd):
    gz, diff_id = layer(files)
    ldesc = dict(mediaType="application/vnd.oci.image.layer.v1.tar+gzip", **put(gz))
    config = {"architecture": arch, "os": "linux",
              "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": cmd},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    cdesc = dict(mediaType="application/vnd.oci.image.config.v1+json", **put(json.dumps(config).encode()))
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cdesc, "layers": [ldesc]}
    return dict(mediaType=manifest["mediaType"], **put(json.dumps(manifest).encode()))


amd_files = {"hello.txt": (b"hello amd64\n", 0o644)}
if os.path.exists("/bin/busybox"):
    with open("/bin/busybox", "rb") as f:
        amd_files["bin/busybox"] = (f.read(), 0o755)
amd = image("amd64", amd_files, ["/bin/busybox"])
arm = image("arm64", {"hello.txt": (b"hello arm64\n", 0o644)}, ["/bin/sh"])
multi = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [dict(arm, platform={"os": "linux", "architecture": "arm64"}),
                       dict(amd, platform={"os": "linux", "architecture": "amd64"})]}
multi_desc = dict(mediaType=multi["mediaType"], **put(json.dumps(multi).encode()))


def named(desc, ref):
    return dict(desc, annotations={"org.opencontainers.image.ref.name": ref})


with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [named(amd, "amd"), named(arm, "arm"), named(multi_desc, "multi")]}, f)
