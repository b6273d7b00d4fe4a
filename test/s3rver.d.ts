// s3rver ships no types; the little of it the tests use.
declare module "s3rver" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  interface S3rverOptions {
    silent?: boolean;
    directory?: string;
    configureBuckets?: { name: string }[];
  }

  export default class S3rver {
    constructor(options: S3rverOptions);
    configureBuckets(): Promise<void>;
    /** The server's request handler, to mount on an HTTP server of one's own. */
    callback(): (request: IncomingMessage, response: ServerResponse) => void;
  }
}
