'use strict';
// The stub shop behind the proxy in the browser tests: every path answers a small HTML page
// "Shop page <path>"; paths starting /checkout also carry `Cf-Waiting-Room-Command: revoke`
// (the origin ends the visitor's session once the order is placed).
//
// Used in-process by the tests (startShop), or on its own: `node stub-shop.js PORT`.

const http = require('node:http');

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function startShop(port = 0, host = '127.0.0.1') {
  const seen = [];
  const server = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://shop.invalid').pathname;
    seen.push({ method: req.method, path, cookie: req.headers.cookie || '' });
    const title = `Shop page ${escapeHtml(path)}`;
    const body =
      '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
      '<link rel="icon" href="data:,">' +
      `<title>${title}</title></head><body><main><h1>${title}</h1></main></body></html>`;
    const headers = {
      'content-type': 'text/html; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    };
    if (path.startsWith('/checkout')) headers['cf-waiting-room-command'] = 'revoke';
    res.writeHead(200, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  // Keep-alive sockets of the proxy must not hold close() up.
  server.keepAliveTimeout = 1000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const addr = server.address();
      resolve({
        port: addr.port,
        address: `${host}:${addr.port}`,
        seen,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
  });
}

module.exports = { startShop };

if (require.main === module) {
  const port = Number(process.argv[2] || 3000);
  startShop(port).then((s) => console.log(`stub shop on http://${s.address}/`));
}
