#!/usr/bin/env python3
"""A hostile registry for measuring ferry's listing bounds (docs/security.md, issue 30: 2, 3, 5).

usage: hostile_listing_server.py PORT SHAPE
  SHAPE big-names : every tag list and the catalog are 2 pages of ~15.9 MiB, each holding
                    names of 100 KiB (not valid tags or repository names): ~31.8 MiB in all,
                    just under ferry's 32 MiB listing budget
  SHAPE many-tags : a tag list of 200,000 valid 128-character tags in 20 pages (~25 MiB)
"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, SHAPE = int(sys.argv[1]), sys.argv[2]
MIB = 1 << 20

def big_pages(prefix):
    pages = []
    for p in range(2):
        names, size = [], 20
        i = 0
        while size + 100 * 1024 + 4 < int(15.9 * MIB):
            names.append(f"{prefix}B{p}x{i}" + "B" * (100 * 1024))
            size += len(names[-1]) + 3
            i += 1
        pages.append(names)
    return pages

if SHAPE == "big-names":
    TAGS = big_pages("")
    CATALOG = big_pages("team/")
    CATALOG[0].insert(0, "team/app")
else:
    TAGS = [[f"t{p:02d}{i:05d}" + "x" * 120 for i in range(10_000)] for p in range(20)]
    CATALOG = [["team/app"]]

def body(pages, field, k):
    return json.dumps({field: pages[k]}).encode()

CACHE = {}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def send(self, status, data, link=None):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if link:
            self.send_header("link", f'<{link}>; rel="next"')
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        path, _, query = self.path.partition("?")
        k = int(query.split("page=")[1]) if "page=" in query else 0
        if path == "/v2/":
            return self.send(200, b"{}")
        if path == "/v2/_catalog":
            pages, field = CATALOG, "repositories"
        elif path.endswith("/tags/list"):
            pages, field = TAGS, "tags"
        else:
            return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}')
        key = (field, k)
        if key not in CACHE:
            CACHE[key] = body(pages, field, k)
        nxt = f"{path}?page={k + 1}" if k + 1 < len(pages) else None
        self.send(200, CACHE[key], nxt)
    def do_HEAD(self):
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
