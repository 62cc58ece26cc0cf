// The Node candidate of the cold-path bench: the counterpart of our command-handler's create.
//
// Init (module top level, as in Lambda): loads the whole @mbc-cqrs-serverless/core package (its
// index, as an application that imports it does) and builds the framework's own DynamoDbService
// (with the S3Service it takes), each making its SDK client, as the framework's DataStoreModule does.
// The NestJS application that a real mbc-cqrs-serverless function also bootstraps is NOT built:
// this is a lower bound of the framework's cold start.
//
// Invocation: the same API Gateway (HTTP API v2) event as command-handler's create. Builds the
// command item with the package's key helpers and writes it with the framework's
// DynamoDbService.putItem and the condition its CommandService uses for a new item (one
// conditional PutItem, as our command-handler), then answers 202 with the stored keys.
'use strict';

const {
  DynamoDbService,
  S3Service,
  addSortKeyVersion,
  generateId,
  getTenantCode,
} = require('@mbc-cqrs-serverless/core');

const settings = {
  DYNAMODB_ENDPOINT: process.env.AWS_ENDPOINT_URL_DYNAMODB,
  DYNAMODB_REGION: process.env.AWS_REGION,
  S3_ENDPOINT: process.env.AWS_ENDPOINT_URL_S3,
  S3_REGION: process.env.AWS_REGION,
  S3_BUCKET_NAME: 'bench-unused',
  ATTRIBUTE_LIMIT_SIZE: 389120,
  NODE_ENV: 'bench',
  APP_NAME: 'bench',
};
const config = { get: (key) => settings[key] };
const dynamoDb = new DynamoDbService(config, new S3Service(config));
const table = process.env.COMMAND_TABLE;
if (!table) throw new Error('COMMAND_TABLE is required');

exports.handler = async (event) => {
  const body = JSON.parse(event.body);
  const claims = event.requestContext.authorizer.jwt.claims;
  const ip = event.requestContext.http.sourceIp;
  const now = new Date();
  const version = body.version + 1;
  const command = {
    pk: body.pk,
    sk: addSortKeyVersion(body.sk, version),
    id: generateId(body.pk, body.sk),
    code: body.code,
    name: body.name,
    version,
    tenantCode: getTenantCode(body.pk),
    type: body.pk.split('#')[0],
    isDeleted: false,
    attributes: body.attributes,
    source: 'POST /commands',
    requestId: event.requestContext.requestId,
    createdAt: now,
    createdBy: claims.sub,
    createdIp: ip,
    updatedAt: now,
    updatedBy: claims.sub,
    updatedIp: ip,
  };
  await dynamoDb.putItem(table, command, 'attribute_not_exists(pk) AND attribute_not_exists(sk)');
  return {
    statusCode: 202,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: command.id, pk: command.pk, sk: command.sk, version }),
  };
};
