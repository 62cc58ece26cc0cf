// A tiny Lambda Runtime API client for Node: the same protocol as the AWS runtimes and as Rust's
// lambda_runtime, so the Node handlers of the cold-path bench run under an equivalent loop.
//
//   AWS_LAMBDA_RUNTIME_API=127.0.0.1:PORT node runtime.js handler.js
//
// Init: loads the handler module (its top level is the function's init phase; a failure is posted
// to /runtime/init/error). Then forever: GET /runtime/invocation/next, call
// `handler(event, context)`, POST the result to /runtime/invocation/{id}/response (or the error to
// /runtime/invocation/{id}/error). Only node:http, keep-alive on one socket, as the Rust client.
'use strict';

const http = require('node:http');
const path = require('node:path');

const API = '/2018-06-01/runtime';
const [host, port] = (process.env.AWS_LAMBDA_RUNTIME_API || '').split(':');
if (!host || !port) {
  console.error('runtime.js: AWS_LAMBDA_RUNTIME_API=host:port is required');
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(method, route, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request(
      {
        host,
        port: Number(port),
        method,
        path: API + route,
        agent,
        headers: payload
          ? { 'content-type': 'application/json', 'content-length': payload.length }
          : {},
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

function errorBody(e) {
  return JSON.stringify({
    errorMessage: String((e && e.message) || e),
    errorType: (e && e.name) || 'Error',
    stackTrace: String((e && e.stack) || '').split('\n'),
  });
}

async function main() {
  let handler;
  try {
    handler = require(path.resolve(process.argv[2] || 'handler.js')).handler;
    if (typeof handler !== 'function') throw new Error('the module exports no handler function');
  } catch (e) {
    await call('POST', '/init/error', errorBody(e));
    process.exit(1);
  }
  for (;;) {
    const next = await call('GET', '/invocation/next');
    const id = next.headers['lambda-runtime-aws-request-id'];
    const context = {
      awsRequestId: id,
      invokedFunctionArn: next.headers['lambda-runtime-invoked-function-arn'],
      functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
      getRemainingTimeInMillis: () => Number(next.headers['lambda-runtime-deadline-ms']) - Date.now(),
    };
    try {
      const result = await handler(JSON.parse(next.body), context);
      await call('POST', `/invocation/${id}/response`, JSON.stringify(result === undefined ? null : result));
    } catch (e) {
      await call('POST', `/invocation/${id}/error`, errorBody(e));
    }
  }
}

main().catch((e) => {
  console.error('runtime.js:', e);
  process.exit(1);
});
