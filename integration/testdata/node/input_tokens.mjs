// input_tokens.mjs counts a request's input tokens with the openai npm
// package's responses.inputTokens.count, then creates the same request
// with responses.create, and prints both for integration/node_test.go:
// the count must equal the response's usage.input_tokens.
//
// Usage: LOOM_BASE_URL=http://127.0.0.1:PORT/v1 node input_tokens.mjs 'REQUEST-JSON'
import OpenAI from 'openai';

async function main() {
  const params = JSON.parse(process.argv[2]);
  const baseURL = process.env.LOOM_BASE_URL;
  if (!baseURL) throw new Error('LOOM_BASE_URL is not set');
  const client = new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, timeout: 15000 });
  const count = await client.responses.inputTokens.count(params);
  const response = await client.responses.create(params);
  process.stdout.write(JSON.stringify({ count, usage: response.usage, status: response.status }) + '\n');
}

main().catch((err) => {
  process.stderr.write(String(err?.stack ?? err) + '\n');
  process.exit(1);
});
