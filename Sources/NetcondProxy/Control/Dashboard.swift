import Foundation
import NetcondCore

/// The live dashboard the control API serves at its root (`http://127.0.0.1:8081/`): graphs that
/// move (throughput down and up, queueing delay, losses and retransmissions, open connections),
/// with time and value axes, drawn from the history netcond keeps (`GET /history`, the last 10
/// minutes, so a page opened late shows what happened) with the outages, stalls, profile
/// switches and fault hits marked; the state line from `GET /status`, twice a second; and the
/// controls of `netcond ctl` (profile, outage, stall, captive portal, faults, cut), each a request
/// to the same API.
///
/// It is served from the API's own origin, so its requests carry that loopback `Origin` and a JSON
/// type and pass `ControlAccess`; a page elsewhere still cannot change anything. It may not be
/// framed (a page elsewhere cannot put it under a click), and its own policy allows nothing but
/// its inline script and style and requests to the API.
enum Dashboard {
    static let headers: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'"
        ),
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
        .state{color:#555}.state b{color:#222}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:1em}
        .graph{border:1px solid #ddd;padding:.4em .6em;background:#fcfcfc}.graph h2{font-size:.95em;margin:0}
        .value{font-size:1.1em;font-weight:600}svg.plot{width:100%;height:150px;display:block}
        polyline{fill:none;stroke-width:1.5;vector-effect:non-scaling-stroke}
        .down{stroke:#264653}.up{stroke:#e76f51}.loss{stroke:#b3261e}.retx{stroke:#8a5300}.conn{stroke:#2a9d8f}
        .key{font-size:.85em;color:#555}.key i{display:inline-block;width:1.2em;height:.25em;vertical-align:middle;margin:0 .3em 0 .6em}
        .key .down{background:#264653}.key .up{background:#e76f51}.key .loss{background:#b3261e}.key .retx{background:#8a5300}.key .conn{background:#2a9d8f}
        .axis{stroke:#999;stroke-width:1}.grid-line{stroke:#e4e4e4;stroke-width:1}.tick{font-size:10px;fill:#666}
        .mark{stroke-width:1;stroke-dasharray:3 2}.mark-outage{stroke:#b3261e}.mark-stall{stroke:#8a5300}.mark-end{stroke:#999}
        .mark-profile{stroke:#264653}.mark-fault{stroke:#6a4c93}.mark-portal{stroke:#2a9d8f}.mark-label{font-size:9px;fill:#444}
        fieldset{border:1px solid #ddd;margin:.6em 0;padding:.4em .6em}button{margin:.15em}#said{min-height:1.4em;color:#555}
        #said.error{color:#b3261e}
        </style></head><body>
        <h1>netcond</h1>
        <p class="state">profile <b id="profile">…</b> · phase <b id="phase">…</b> · outage <b id="outage">none</b> ·
        stalled <b id="stalled">no</b> · portal <b id="portal">none</b> · <span id="engine"></span> engine · seed <b id="seed"></b> ·
        <span id="elapsed"></span> s · show the last <select id="window"><option value="60">minute</option>
        <option value="120" selected>2 minutes</option><option value="300">5 minutes</option><option value="600">10 minutes</option></select></p>
        <div class="grid">
        <div class="graph"><h2>Throughput (kbit/s)</h2><span class="value">↓ <span id="down-rate">0</span> ↑ <span id="up-rate">0</span></span>
        <span class="key"><i class="down"></i>down (delivered) <i class="up"></i>up</span>
        <svg class="plot" id="plot-throughput" viewBox="0 0 400 150"></svg></div>
        <div class="graph"><h2>Queueing delay at the bottleneck (ms)</h2><span class="value">↓ <span id="queue-down">0</span> ↑ <span id="queue-up">0</span></span>
        <span class="key"><i class="down"></i>down <i class="up"></i>up</span>
        <svg class="plot" id="plot-queue" viewBox="0 0 400 150"></svg></div>
        <div class="graph"><h2>Lost and retransmitted (segments/s)</h2><span class="value">lost <span id="lost">0</span> · retransmitted <span id="retx">0</span></span>
        <span class="key"><i class="loss"></i>lost <i class="retx"></i>retransmitted</span>
        <svg class="plot" id="plot-loss" viewBox="0 0 400 150"></svg></div>
        <div class="graph"><h2>Open connections</h2><span class="value" id="open-connections">0</span>
        <span class="key"><i class="conn"></i>open</span>
        <svg class="plot" id="plot-connections" viewBox="0 0 400 150"></svg></div>
        </div>
        <p class="key">Dashed lines: <span style="color:#b3261e">outage</span>, <span style="color:#8a5300">stall</span>,
        <span style="color:#264653">profile</span>, <span style="color:#6a4c93">fault hit</span>, <span style="color:#2a9d8f">portal</span>,
        grey: an end. History is kept by netcond (the last 10 minutes, sampled every 0.5 s).</p>
        <fieldset><legend>Profile</legend><select id="profile-choice"></select> <button id="profile-switch">switch</button></fieldset>
        <fieldset><legend>Outage</legend><button id="outage-blackhole">blackhole</button><button id="outage-refuse">refuse</button>
        <button id="outage-reset">reset</button><button id="outage-end">end outage</button></fieldset>
        <fieldset><legend>Stall</legend><button id="stall-down">down</button><button id="stall-up">up</button>
        <button id="stall-both">both</button><button id="stall-end">end stall</button></fieldset>
        <fieldset><legend>Captive portal</legend><button id="captive-close">close</button><button id="captive-open">open (log in)</button></fieldset>
        <fieldset><legend>Cut every open connection</legend><button id="cut-reset">reset</button><button id="cut-close">close</button></fieldset>
        <fieldset><legend>Faults</legend><input id="fault" size="50" placeholder='{"status": 503, "retry_after": 5, "first": 3}'>
        <button id="fault-add">add</button><button id="faults-clear">remove all</button> <span id="faults">0 in force</span></fieldset>
        <table id="routes" hidden><caption>Destinations: each route beyond the access link, its link now</caption>
        <thead><tr><th>route</th><th>match</th><th>↓ rate, delay</th><th>↑ rate, delay</th><th>state</th><th>connections</th><th>↓ carried</th><th></th></tr></thead>
        <tbody></tbody></table>
        <p id="said"></p>
        <script>
        (function(){
        var profiles = PROFILES, samples = [], marks = [], lastT = null, chosenAt = 0, SVG = 'http://www.w3.org/2000/svg';
        // Each plot: its lines (the sample field each draws, and its class), and the least top of its scale.
        var plots = {
          'plot-throughput': {lines: [['down_kbps', 'down', 'graph-down'], ['up_kbps', 'up', 'graph-up']], floor: 10},
          'plot-queue': {lines: [['queue_down_ms', 'down', 'graph-queue-down'], ['queue_up_ms', 'up', 'graph-queue-up']], floor: 10},
          'plot-loss': {lines: [['lost_per_s', 'loss', 'graph-lost'], ['retransmitted_per_s', 'retx', 'graph-retx']], floor: 1},
          'plot-connections': {lines: [['connections_open', 'conn', 'graph-connections']], floor: 1}
        };
        var L = 44, R = 392, T = 8, B = 128;  // the plot area in the 400 x 150 view box
        var choice = document.getElementById('profile-choice');
        profiles.forEach(function(p){var o=document.createElement('option');o.value=p;o.textContent=p;choice.appendChild(o);});
        choice.addEventListener('change', function(){chosenAt = Date.now();});
        function text(id, v){document.getElementById(id).textContent = v;}
        function node(parent, name, attributes, content){var e=document.createElementNS(SVG,name);
          for (var k in attributes) e.setAttribute(k, attributes[k]); if (content !== undefined) e.textContent = content; parent.appendChild(e); return e;}
        // A round top for the scale: 1, 2 or 5 times a power of ten, at least the values' maximum.
        function niceTop(v){var p=Math.pow(10,Math.floor(Math.log10(v))),m=v/p;return (m<=1?1:m<=2?2:m<=5?5:10)*p;}
        function label(v){return v===0?'0':v>=10000?(v/1000).toFixed(0)+'k':v>=1000?(v/1000).toFixed(1)+'k':v>=10?v.toFixed(0):v>=1?v.toFixed(1):v.toFixed(2);}
        // A mark's label beside its line (to its left where the right edge would cut it), in the
        // first row it overlaps nothing in; left out when there is none.
        function placeLabel(svg, rows, at, name, said){
          var label = node(svg, 'text', {x: at + 2, y: T + 8, 'class': 'mark-label'}, name);
          node(label, 'title', {}, said);
          var width = label.getComputedTextLength() || name.length * 5;
          var left = at + 2 + width > 400 ? at - 2 - width : at + 2, right = left + width + 3;
          var row = rows.findIndex(function(spans){
            return spans.every(function(s){return right <= s[0] || left >= s[1];});});
          if (row < 0) { svg.removeChild(label); return; }
          rows[row].push([left, right]);
          label.setAttribute('x', left.toFixed(1)); label.setAttribute('y', T + 8 + 10 * row);
        }
        function drawAll(){
          var windowSeconds = Number(document.getElementById('window').value);
          var t1 = samples.length ? samples[samples.length-1].t : 0, t0 = Math.max(0, t1 - windowSeconds);
          if (t1 - t0 < 10) t1 = t0 + 10;
          var shown = samples.filter(function(s){return s.t >= t0;});
          var x = function(t){return L + (R - L) * (t - t0) / (t1 - t0);};
          Object.keys(plots).forEach(function(id){
            var plot = plots[id], svg = document.getElementById(id), top = plot.floor;
            shown.forEach(function(s){plot.lines.forEach(function(line){top = Math.max(top, s[line[0]]);});});
            top = niceTop(top);
            var y = function(v){return B - (B - T) * v / top;};
            while (svg.firstChild) svg.removeChild(svg.firstChild);
            svg.setAttribute('data-t0', t0); svg.setAttribute('data-t1', t1); svg.setAttribute('data-top', top);
            [0, 0.5, 1].forEach(function(f){var v = top * f;
              node(svg, 'line', {x1: L, x2: R, y1: y(v), y2: y(v), 'class': f ? 'grid-line' : 'axis'});
              node(svg, 'text', {x: L - 4, y: y(v) + 3, 'text-anchor': 'end', 'class': 'tick'}, label(v));});
            node(svg, 'line', {x1: L, x2: L, y1: T, y2: B, 'class': 'axis'});
            var step = [5, 10, 15, 30, 60, 120, 300].filter(function(s){return (t1 - t0) / s <= 6;})[0] || 600;
            for (var t = Math.ceil(t0 / step) * step; t <= t1 + 1e-9; t += step) {
              node(svg, 'line', {x1: x(t), x2: x(t), y1: B, y2: B + 3, 'class': 'axis'});
              node(svg, 'text', {x: x(t), y: B + 13, 'text-anchor': 'middle', 'class': 'tick'}, t + ' s');
            }
            // The throughput plot names its marks: each label in the first of three rows where it
            // clears the labels already there; one that fits in none is left out (its line's title says it).
            var labelRows = [[], [], []];
            marks.filter(function(m){return m.t >= t0 && m.t <= t1;}).forEach(function(m){
              var kind = m.kind.slice(-4) === '-end' ? 'end' : m.kind;
              var said = '+' + m.t.toFixed(1) + ' s ' + m.kind + ': ' + m.detail;
              var line = node(svg, 'line', {x1: x(m.t), x2: x(m.t), y1: T, y2: B, 'class': 'mark mark-' + kind, 'data-kind': m.kind});
              node(line, 'title', {}, said);
              if (id === 'plot-throughput' && kind !== 'end') placeLabel(svg, labelRows, x(m.t), m.kind, said);
            });
            plot.lines.forEach(function(line){
              node(svg, 'polyline', {id: line[2], 'class': line[1], 'data-field': line[0],
                points: shown.filter(function(s){return s[line[0]] !== null;})
                  .map(function(s){return x(s.t).toFixed(2) + ',' + y(s[line[0]]).toFixed(2);}).join(' ')});
            });
          });
          var last = samples[samples.length - 1];
          if (last) {
            text('down-rate', Math.round(last.down_kbps)); text('up-rate', Math.round(last.up_kbps));
            var unsaid = 'not measured by this engine';
            text('queue-down', last.queue_down_ms === null ? unsaid : last.queue_down_ms.toFixed(0));
            text('queue-up', last.queue_up_ms === null ? unsaid : last.queue_up_ms.toFixed(0));
            text('lost', last.lost_per_s.toFixed(1)); text('retx', last.retransmitted_per_s.toFixed(1));
          }
        }
        document.getElementById('window').addEventListener('change', drawAll);
        function said(message, error){var p=document.getElementById('said');p.textContent=message;p.className=error?'error':'';}
        function update(s){
        text('profile', s.profile); text('phase', s.phase); text('outage', s.outage || 'none');
        text('stalled', s.stalled.length ? s.stalled.join(', ') : 'no'); text('portal', s.captive_portal || 'none');
        text('engine', s.engine || 'proxy'); text('seed', s.seed); text('elapsed', s.elapsed_seconds.toFixed(1));
        text('open-connections', s.connections_open); text('faults', s.faults + ' in force');
        if (s.routes) fetch('/routes', {cache: 'no-store'}).then(function(r){return r.json();}).then(function(j){routes(j.routes);});
        else routes([]);
        // The profile control follows the profile in force, unless the user has just picked another.
        if (Date.now() - chosenAt > 10000 && profiles.indexOf(s.profile) >= 0 && document.activeElement !== choice) choice.value = s.profile;
        }
        // One row per route, made once and updated in place from /status (its buttons stay where
        // they are under the pointer); its buttons change that route alone.
        function routes(list){
          var table = document.getElementById('routes'), body = table.tBodies[0];
          table.hidden = list.length === 0;
          var link = function(r, d){var l = r.link.filter(function(x){return x.direction === d;})[0];
            return l ? (l.rate_bps === null ? 'unlimited' : (l.rate_bps / 1000).toFixed(0) + ' kbit/s') + ', ' + l.delay_ms.toFixed(0) + ' ms' : '';};
          Array.prototype.slice.call(body.rows).forEach(function(row){
            if (!list.some(function(r){return r.name === row.getAttribute('data-route');})) body.removeChild(row);});
          list.forEach(function(r){
            var row = Array.prototype.slice.call(body.rows).filter(function(x){return x.getAttribute('data-route') === r.name;})[0];
            if (!row) {
              row = body.insertRow(); row.setAttribute('data-route', r.name);
              for (var i = 0; i < 7; i++) row.insertCell();
              var actions = row.insertCell();
              ['blackhole', 'refuse', 'end'].forEach(function(b){
                var button = document.createElement('button'); button.textContent = b === 'end' ? 'end outage' : b;
                button.className = 'route-' + b;
                button.addEventListener('click', function(){send('POST', '/routes/' + encodeURIComponent(r.name), {outage: b});});
                actions.appendChild(button);
              });
            }
            var values = [r.name, r.match, link(r, 'down'), link(r, 'up'),
              r.outage ? 'outage (' + r.outage + ')' : r.stalled.length ? 'stalled ' + r.stalled.join('+') : r.phase, r.connections,
              r.bytes_down < 1024 ? r.bytes_down + ' B' : (r.bytes_down / 1024).toFixed(0) + ' KB'];
            values.forEach(function(v, i){if (row.cells[i].textContent !== String(v)) row.cells[i].textContent = v;});
          });
        }
        function history(){return fetch('/history' + (lastT === null ? '' : '?since=' + lastT), {cache:'no-store'}).then(function(r){return r.json();})
        .then(function(h){
          samples = samples.concat(h.samples); marks = marks.concat(h.marks);
          if (samples.length > 1200) samples = samples.slice(samples.length - 1200);
          if (h.samples.length) lastT = h.samples[h.samples.length - 1].t;
          drawAll();
        });}
        function poll(){Promise.all([fetch('/status',{cache:'no-store'}).then(function(r){return r.json();}).then(update), history()])
        .catch(function(){said('netcond is not answering (stopped?)', true);}).then(function(){setTimeout(poll, 500);});}
        function send(method, path, body){
        var options = {method: method, headers: {'Content-Type': 'application/json'}};
        if (body !== undefined) options.body = typeof body === 'string' ? body : JSON.stringify(body);
        fetch(path, options).then(function(r){return r.json().then(function(j){
        if (!r.ok) said(j.error || ('HTTP ' + r.status), true); else { said(method + ' ' + path + ': done', false); if (j.profile) update(j); }});})
        .catch(function(e){said(String(e), true);});}
        function on(id, f){document.getElementById(id).addEventListener('click', f);}
        on('profile-switch', function(){chosenAt = 0; send('POST','/profile',{name: choice.value});});
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
