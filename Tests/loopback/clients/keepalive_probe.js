// Node's http with a keep-alive agent, one connection to the proxy: a connectivity probe until it
// answers 204, then NETCOND_URL into NETCOND_OUTPUT on the same connection (as URLSession does).
const http = require('http');
const fs = require('fs');
const proxy = new URL(process.env.HTTP_PROXY);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function get(url) {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: proxy.hostname, port: proxy.port, path: url, agent,
                                   headers: { Host: new URL(url).host } }, (response) => {
      const chunks = [];
      response.on('data', (c) => chunks.push(c));
      response.on('end', () => resolve({ status: response.statusCode, body: Buffer.concat(chunks) }));
    });
    request.on('error', reject);
    request.end();
  });
}
(async () => {
  for (let i = 0; i < 30; i++) {
    const probe = await get('http://connectivitycheck.gstatic.com/generate_204');
    if (probe.status === 204) break;
    await new Promise((s) => setTimeout(s, 1000));
  }
  const file = await get(process.env.NETCOND_URL);
  if (file.status !== 200) process.exit(1);
  fs.writeFileSync(process.env.NETCOND_OUTPUT, file.body);
  agent.destroy();
})().catch((e) => { console.error(e); process.exit(1); });
