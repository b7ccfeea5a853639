"""The captive portal as real clients meet it: curl saves the login page as data, the OS probes
detect the portal (and see "no portal" once logged in, or in a run without one, offline), HTTPS is
reset, the RFC 8908 API reports the state, and a login (a POST, or `netcond ctl captive open`)
lets everything through."""
import json
import os
import subprocess

from conftest import curl, origin_bytes, run, status


def test_a_naive_download_saves_the_portal_page_as_data(tmp):
    out = os.path.join(tmp, "file.bin")
    result = run(["run", "captive-hotel", "--", "curl", "-sS", "-o", out, "http://origin.netcond.test/bytes/10KB"])
    assert result.returncode == 0  # curl is happy …
    with open(out, "rb") as f:
        saved = f.read()
    assert saved != origin_bytes(10 * 1024) and b"<form method=\"POST\"" in saved  # … with a login page


def test_probes_detect_the_portal_and_a_login_opens_it(proxy_factory):
    proxy = proxy_factory("captive-hotel")
    apple = curl(proxy, "http://captive.apple.com/hotspot-detect.html")
    assert b"Success" not in apple.stdout and b"Log in" in apple.stdout
    google = curl(proxy, "-o", "/dev/null", "-w", "%{http_code}", "http://connectivitycheck.gstatic.com/generate_204")
    assert google.stdout == b"200"  # not 204: a portal
    tls = curl(proxy, "-o", "/dev/null", "https://example.com/")
    assert tls.returncode == 56 and b"502" not in tls.stderr  # reset, as the portal does
    api = curl(proxy, "-D", "-", "http://portal.netcond.test/api")
    assert b"application/captive+json" in api.stdout and b'"captive": true' in api.stdout
    assert status(proxy)["captive_portal"] == "closed"

    login = curl(proxy, "-d", "room=101&accept=on", "http://portal.netcond.test/login")
    assert login.returncode == 0 and b"connected" in login.stdout
    assert curl(proxy, "http://captive.apple.com/hotspot-detect.html").stdout.endswith(b"<BODY>Success</BODY></HTML>")
    assert curl(proxy, "-o", "/dev/null", "-w", "%{http_code}",
                "http://connectivitycheck.gstatic.com/generate_204").stdout == b"204"
    data = curl(proxy, "http://origin.netcond.test/bytes/10KB")
    assert data.stdout == origin_bytes(10 * 1024)
    events = json.loads(proxy.ctl("events", "--json").stdout)["events"]
    captive = [e["detail"] for e in events if e["kind"] == "captive"]
    assert any(d.startswith("portal reset: example.com:443") for d in captive)
    assert any(d.startswith("portal opened: POST http://portal.netcond.test/login") for d in captive)


def test_live_close_and_open_and_the_api_for_clients(proxy_factory):
    proxy = proxy_factory("captive-hotel")
    assert proxy.ctl("captive", "open").returncode == 0
    assert curl(proxy, "http://origin.netcond.test/bytes/1KB").stdout == origin_bytes(1024)
    assert proxy.ctl("captive", "close").returncode == 0
    assert b"Log in" in curl(proxy, "http://origin.netcond.test/bytes/1KB").stdout
    script = (
        "import os, requests\n"
        "r = requests.get(os.environ['NETCOND_CAPTIVE_API'], timeout=10)\n"
        "print(r.headers['Content-Type'], r.json()['captive'], r.json()['user-portal-url'])\n"
    )
    result = run(["run", "captive-hotel", "--", "python3", "-c", script])
    assert result.stdout.split() == ["application/captive+json", "True", "http://portal.netcond.test/login"]
    nothing = run(["ctl", "captive", "open", "--control", "http://127.0.0.1:1"])
    assert nothing.returncode == 3


def test_without_a_portal_the_probes_answer_no_portal_offline(proxy_factory):
    proxy = proxy_factory("lte")
    assert curl(proxy, "http://captive.apple.com/hotspot-detect.html").stdout.endswith(b"<BODY>Success</BODY></HTML>")
    assert curl(proxy, "http://www.msftconnecttest.com/connecttest.txt").stdout == b"Microsoft Connect Test"
    assert curl(proxy, "http://detectportal.firefox.com/success.txt").stdout == b"success\n"
    refused = proxy.ctl("captive", "open")
    assert refused.returncode == 2 and "has no captive portal" in refused.stderr


def test_wrong_certificate_portal_fails_tls_verification(tmp):
    profile = os.path.join(tmp, "mitm.yaml")
    with open(profile, "w") as f:
        f.write("extends: captive-hotel\ncaptive_portal: {https: wrong-certificate}\n")
    strict = run(["run", profile, "--", "curl", "-sS", "-o", "/dev/null", "https://example.com/"])
    assert strict.returncode == 60 and "certificate" in strict.stderr  # SSL certificate problem
    lax = run(["run", profile, "--", "curl", "-sS", "-k", "https://example.com/"])
    assert lax.returncode == 0 and "Log in" in lax.stdout  # a client that ignores it gets the portal
    script = (
        "import requests\n"
        "try:\n"
        "    requests.get('https://example.com/', timeout=20)\n"
        "    print('accepted')\n"
        "except requests.exceptions.SSLError as e:\n"
        "    print('SSLError', 'certificate verify failed' in str(e))\n"
    )
    python = run(["run", profile, "--", "python3", "-c", script])
    assert python.stdout.split() == ["SSLError", "True"]
    subject = run(["run", profile, "--", "sh", "-c",
                   "echo | openssl s_client -proxy \"${http_proxy#http://}\" -connect example.com:443 "
                   "-servername example.com 2>/dev/null | openssl x509 -noout -subject -ext subjectAltName"])
    assert "CN = portal.netcond.test" in subject.stdout and "DNS:portal.netcond.test" in subject.stdout
