#!/usr/bin/env python3
"""Registry CPU per request kind (issue 42): replays N requests of one kind at a running
distribution registry over one keep-alive connection and divides the registry process's CPU
delta (utime+stime from /proc/PID/stat) by N. Survives a busy machine better than wall time.

usage: scripts/registry-cost-per-request.py HOST:PORT PID [N]
"""
import hashlib
import http.client
import os
import sys

host, pid = sys.argv[1], int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
tick = os.sysconf("SC_CLK_TCK")


def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


conn = http.client.HTTPConnection(host)


def req(method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    r.read()
    return r


def blob(i, size=2048):
    data = hashlib.sha256(str(i).encode()).digest() * (size // 32)
    return data, "sha256:" + hashlib.sha256(data).hexdigest()


def upload(repo, data, digest):
    r = req("POST", f"/v2/{repo}/blobs/uploads/")
    loc = r.getheader("Location").split(host, 1)[-1]
    sep = "&" if "?" in loc else "?"
    r = req("PUT", f"{loc}{sep}digest={digest}", data, {"Content-Type": "application/octet-stream"})
    assert r.status == 201, r.status


def measure(name, fn):
    before = cpu()
    for i in range(n):
        fn(i)
    spent = cpu() - before
    print(f"{name:<34} {n:>5} requests  {1000 * spent / n:7.2f} ms registry CPU each")


blobs = [blob(i) for i in range(n)]
measure("upload POST+PUT, 2 KiB (pair)", lambda i: upload("cost/a", *blobs[i]))
measure("blob HEAD (present)", lambda i: req("HEAD", f"/v2/cost/a/blobs/{blobs[i][1]}"))
measure("blob HEAD (absent)", lambda i: req("HEAD", f"/v2/cost/b/blobs/{blobs[i][1]}"))
measure("mount POST (blob there)", lambda i: req("POST", f"/v2/cost/c/blobs/uploads/?mount={blobs[i][1]}&from=cost/a"))
missing = [blob(10_000 + i) for i in range(n)]
measure("mount POST (blob not there: 202)", lambda i: req("POST", f"/v2/cost/d/blobs/uploads/?mount={missing[i][1]}&from=cost/a"))
measure("upload POST alone (session opened)", lambda i: req("POST", "/v2/cost/e/blobs/uploads/"))
measure("blob GET 2 KiB", lambda i: req("GET", f"/v2/cost/a/blobs/{blobs[i][1]}"))
measure("tag list (empty repo)", lambda i: req("GET", "/v2/cost/a/tags/list"))
measure("ping /v2/", lambda i: req("GET", "/v2/"))


def fresh_ping(i):
    global conn
    conn.close()
    conn = http.client.HTTPConnection(host)
    req("GET", "/v2/")


measure("ping /v2/ on a new connection each", fresh_ping)
