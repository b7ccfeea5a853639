import Foundation
import NetcondCore

/// The live dashboard the control API serves at its root (`http://127.0.0.1:8081/`): graphs that
/// move (throughput down and up, queueing delay, losses and retransmissions, open connections) and
/// the phase, from `GET /status` twice a second; and the controls of `netcond ctl` (profile,
/// outage, stall, captive portal, faults, cut), each a request to the same API.
///
/// It is served from the API's own origin, so its requests carry that loopback `Origin` and a JSON
/// type and pass `ControlAccess`; a page elsewhere still cannot change anything. It may not be
/// framed (a page elsewhere cannot put it under a click), and its own policy allows nothing but
/// its inline script and style and requests to the API.
enum Dashboard {
    static let headers: [(String, String)] = [
        ("Content-Security-Policy",
         "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'"),
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]

    static let response = JSONHTTPResponse(
        status: 200, body: Array(Self.page.utf8), contentType: "text/html; charset=utf-8", headers: Self.headers)

    /// The built-in profiles, for the profile control (JSON, safe inside a script).
    static var profileNames: String {
        let names = ProfileCatalog.knownNames.sorted()
        let data = (try? JSONSerialization.data(withJSONObject: names)) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }

    static let page = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>netcond dashboard</title><style>
        body{font:14px/1.4 system-ui,sans-serif;margin:1.2em;color:#222}h1{font-size:1.3em;margin:0 0 .4em}
        .state{color:#555}.state b{color:#222}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:1em}
        .graph{border:1px solid #ddd;padding:.4em .6em;background:#fcfcfc}.graph h2{font-size:.95em;margin:0}
        .value{font-size:1.2em;font-weight:600}svg{width:100%;height:90px}polyline{fill:none;stroke-width:1.5}
        .down{stroke:#264653}.up{stroke:#e76f51}.loss{stroke:#b3261e}.retx{stroke:#8a5300}.conn{stroke:#2a9d8f}
        fieldset{border:1px solid #ddd;margin:.6em 0;padding:.4em .6em}button{margin:.15em}#said{min-height:1.4em;color:#555}
        #said.error{color:#b3261e}
        </style></head><body>
        <h1>netcond</h1>
        <p class="state">profile <b id="profile">…</b> · phase <b id="phase">…</b> · outage <b id="outage">none</b> ·
        stalled <b id="stalled">no</b> · portal <b id="portal">none</b> · <span id="engine"></span> engine · seed <b id="seed"></b> ·
        <span id="elapsed"></span> s</p>
        <div class="grid">
        <div class="graph"><h2>Throughput (kbit/s)</h2><span class="value">↓ <span id="down-rate">0</span> ↑ <span id="up-rate">0</span></span>
        <svg viewBox="0 0 120 60" preserveAspectRatio="none"><polyline id="graph-down" class="down" points=""/><polyline id="graph-up" class="up" points=""/></svg></div>
        <div class="graph"><h2>Queueing delay (ms)</h2><span class="value">↓ <span id="queue-down">0</span> ↑ <span id="queue-up">0</span></span>
        <svg viewBox="0 0 120 60" preserveAspectRatio="none"><polyline id="graph-queue-down" class="down" points=""/><polyline id="graph-queue-up" class="up" points=""/></svg></div>
        <div class="graph"><h2>Lost and retransmitted (segments/s)</h2><span class="value">lost <span id="lost">0</span> · retransmitted <span id="retx">0</span></span>
        <svg viewBox="0 0 120 60" preserveAspectRatio="none"><polyline id="graph-lost" class="loss" points=""/><polyline id="graph-retx" class="retx" points=""/></svg></div>
        <div class="graph"><h2>Open connections</h2><span class="value" id="open-connections">0</span>
        <svg viewBox="0 0 120 60" preserveAspectRatio="none"><polyline id="graph-connections" class="conn" points=""/></svg></div>
        </div>
        <fieldset><legend>Profile</legend><select id="profile-choice"></select> <button id="profile-switch">switch</button></fieldset>
        <fieldset><legend>Outage</legend><button id="outage-blackhole">blackhole</button><button id="outage-refuse">refuse</button>
        <button id="outage-reset">reset</button><button id="outage-end">end outage</button></fieldset>
        <fieldset><legend>Stall</legend><button id="stall-down">down</button><button id="stall-up">up</button>
        <button id="stall-both">both</button><button id="stall-end">end stall</button></fieldset>
        <fieldset><legend>Captive portal</legend><button id="captive-close">close</button><button id="captive-open">open (log in)</button></fieldset>
        <fieldset><legend>Cut every open connection</legend><button id="cut-reset">reset</button><button id="cut-close">close</button></fieldset>
        <fieldset><legend>Faults</legend><input id="fault" size="50" placeholder='{"status": 503, "retry_after": 5, "first": 3}'>
        <button id="fault-add">add</button><button id="faults-clear">remove all</button> <span id="faults">0 in force</span></fieldset>
        <p id="said"></p>
        <script>
        (function(){
        var profiles = PROFILES, N = 120, series = {down:[],up:[],qd:[],qu:[],lost:[],retx:[],conn:[]}, last = null;
        var choice = document.getElementById('profile-choice');
        profiles.forEach(function(p){var o=document.createElement('option');o.value=p;o.textContent=p;choice.appendChild(o);});
        function text(id, v){document.getElementById(id).textContent = v;}
        function push(key, v){var s=series[key];s.push(v);if(s.length>N)s.shift();}
        function draw(id, key, scale){var s=series[key],m=Math.max.apply(null,[scale||1].concat(s));
        document.getElementById(id).setAttribute('points', s.map(function(v,i){return (i*120/(N-1)).toFixed(1)+','+(60-58*v/m).toFixed(1);}).join(' '));}
        function said(message, error){var p=document.getElementById('said');p.textContent=message;p.className=error?'error':'';}
        function update(s){
        text('profile', s.profile); text('phase', s.phase); text('outage', s.outage || 'none');
        text('stalled', s.stalled.length ? s.stalled.join(', ') : 'no'); text('portal', s.captive_portal || 'none');
        text('engine', s.engine || 'proxy'); text('seed', s.seed); text('elapsed', s.elapsed_seconds.toFixed(1));
        text('open-connections', s.connections_open); text('faults', s.faults + ' in force');
        if (last) {
        var dt = Math.max(0.05, s.elapsed_seconds - last.elapsed_seconds);
        var down = (s.bytes_delivered - last.bytes_delivered) * 8 / 1000 / dt, up = (s.bytes_up - last.bytes_up) * 8 / 1000 / dt;
        var lost = (s.segments_lost + s.queue_drops + s.outage_drops - last.segments_lost - last.queue_drops - last.outage_drops) / dt;
        var retx = (s.retransmissions - last.retransmissions) / dt;
        push('down', Math.max(0, down)); push('up', Math.max(0, up)); push('lost', Math.max(0, lost)); push('retx', Math.max(0, retx));
        text('down-rate', Math.round(Math.max(0, down))); text('up-rate', Math.round(Math.max(0, up)));
        text('lost', lost.toFixed(1)); text('retx', retx.toFixed(1));
        }
        var q = s.queue_delay_ms_up_down || [0, 0];
        push('qu', q[0]); push('qd', q[1]); push('conn', s.connections_open);
        text('queue-up', q[0].toFixed(0)); text('queue-down', q[1].toFixed(0));
        draw('graph-down','down',10); draw('graph-up','down',10); draw('graph-queue-down','qd',10); draw('graph-queue-up','qd',10);
        draw('graph-lost','lost',1); draw('graph-retx','lost',1); draw('graph-connections','conn',1);
        last = s;
        }
        function poll(){fetch('/status',{cache:'no-store'}).then(function(r){return r.json();}).then(update)
        .catch(function(){said('netcond is not answering (stopped?)', true);}).then(function(){setTimeout(poll, 500);});}
        function send(method, path, body){
        var options = {method: method, headers: {'Content-Type': 'application/json'}};
        if (body !== undefined) options.body = typeof body === 'string' ? body : JSON.stringify(body);
        fetch(path, options).then(function(r){return r.json().then(function(j){
        if (!r.ok) said(j.error || ('HTTP ' + r.status), true); else { said(method + ' ' + path + ': done', false); if (j.profile) update(j); }});})
        .catch(function(e){said(String(e), true);});}
        function on(id, f){document.getElementById(id).addEventListener('click', f);}
        on('profile-switch', function(){send('POST','/profile',{name: choice.value});});
        ['blackhole','refuse','reset'].forEach(function(b){on('outage-'+b, function(){send('POST','/outage',{behaviour: b});});});
        on('outage-end', function(){send('DELETE','/outage');});
        ['down','up','both'].forEach(function(d){on('stall-'+d, function(){send('POST','/stall',{direction: d});});});
        on('stall-end', function(){send('DELETE','/stall');});
        on('captive-close', function(){send('POST','/captive',{open: false});});
        on('captive-open', function(){send('POST','/captive',{open: true});});
        on('cut-reset', function(){send('POST','/cut',{mode: 'reset'});});
        on('cut-close', function(){send('POST','/cut',{mode: 'close'});});
        on('fault-add', function(){send('POST','/faults', document.getElementById('fault').value);});
        on('faults-clear', function(){send('DELETE','/faults');});
        poll();
        })();
        </script></body></html>
        """.replacingOccurrences(of: "PROFILES", with: Self.profileNames)
}
