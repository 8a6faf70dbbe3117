// The proof of work's solver (`[proof_of_work]`): a Web Worker hashes seed + nonce with
// WebCrypto until SHA-256 starts with the asked zero bits, the page shows its progress, posts
// the answer and reloads (a place, or a new seed when the answer came too late). Reads
// #wr-proof's data-seed, data-bits and data-url. Without a Worker or WebCrypto (which browsers
// give only to HTTPS pages and localhost) it shows #wr-proof-unsupported instead.
(function () {
  var box = document.getElementById("wr-proof");
  if (!box) return;
  var seed = box.getAttribute("data-seed");
  var bits = Number(box.getAttribute("data-bits"));
  var url = box.getAttribute("data-url");
  var bar = document.getElementById("wr-proof-progress");
  if (!window.Worker || !window.crypto || !window.crypto.subtle || !window.Blob || !window.URL) {
    var note = document.getElementById("wr-proof-unsupported");
    if (note) note.hidden = false;
    if (bar) bar.hidden = true;
    return;
  }
  function work() {
    onmessage = async function (e) {
      var seed = e.data.seed, bits = e.data.bits, encoder = new TextEncoder();
      var whole = bits >> 3, rest = bits & 7, mask = rest ? (0xff << (8 - rest)) & 0xff : 0;
      var batch = 4096, nonce = 0;
      for (;;) {
        var hashes = [];
        for (var i = 0; i < batch; i++) {
          hashes.push(crypto.subtle.digest("SHA-256", encoder.encode(seed + (nonce + i))));
        }
        hashes = await Promise.all(hashes);
        for (var j = 0; j < batch; j++) {
          var h = new Uint8Array(hashes[j]), ok = true;
          for (var k = 0; k < whole && ok; k++) ok = h[k] === 0;
          if (ok && rest) ok = (h[whole] & mask) === 0;
          if (ok) {
            postMessage({ nonce: String(nonce + j), tried: nonce + j + 1 });
            return;
          }
        }
        nonce += batch;
        postMessage({ tried: nonce });
      }
    };
  }
  var source = "(" + work.toString() + ")()";
  var worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })));
  var started = performance.now(), expected = Math.pow(2, bits);
  worker.onmessage = function (e) {
    // The chance a solution was found by now, were the hashes tried so far all there is.
    if (bar) bar.value = Math.min(0.99, 1 - Math.exp(-e.data.tried / expected));
    if (e.data.nonce === undefined) return;
    worker.terminate();
    // What the browser tests read: the solve time and the hashes it took.
    window.waitroomProof = { nonce: e.data.nonce, tried: e.data.tried, ms: performance.now() - started };
    fetch(url, {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: "seed=" + encodeURIComponent(seed) + "&nonce=" + e.data.nonce
    }).then(function () { location.reload(); }, function () { setTimeout(function () { location.reload(); }, 3000); });
  };
  worker.postMessage({ seed: seed, bits: bits });
})();
