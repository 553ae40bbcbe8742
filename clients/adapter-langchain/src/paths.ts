import { posix } from "node:path";

/** Where relative paths resolve, as the sandbox's file endpoints do. */
export const WORKSPACE = "/workspace";

/**
 * An absolute, lexically normal path: relative paths resolve against
 * `/workspace`, repeated slashes and `.` components are dropped, `..` is
 * resolved (never above `/`), and no trailing slash is kept except on `/`.
 * `q//a/./b` is `/workspace/q/a/b`, as the sandbox itself reads it.
 */
export function normalizePath(path: string): string {
  return posix.resolve(WORKSPACE, path);
}

/** `dir` + `/` + `name` without a doubled slash at the root. */
export function joinPath(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

/**
 * MIME types of the extensions deepagents reads as binary (images other than
 * SVG, audio, video, PDF and PowerPoint); every other file is text to it.
 */
const BINARY_TYPES: Readonly<Record<string, string>> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".heic": "image/heic",
  ".heif": "image/heif",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".aiff": "audio/aiff",
  ".aac": "audio/aac",
  ".ogg": "audio/ogg",
  ".flac": "audio/flac",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".mpeg": "video/mpeg",
  ".mov": "video/quicktime",
  ".avi": "video/x-msvideo",
  ".flv": "video/x-flv",
  ".mpg": "video/mpeg",
  ".wmv": "video/x-ms-wmv",
  ".3gpp": "video/3gpp",
  ".pdf": "application/pdf",
  ".ppt": "application/vnd.ms-powerpoint",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
};

function extension(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  const dot = base.lastIndexOf(".");
  return dot <= 0 ? "" : base.slice(dot).toLowerCase();
}

/** The MIME type of a file deepagents treats as binary, or undefined for text. */
export function binaryMimeType(path: string): string | undefined {
  return BINARY_TYPES[extension(path)];
}
