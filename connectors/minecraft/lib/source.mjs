// The live room source lane (not built yet): nothing is sent without a source credential.
export function startSource({ log }) {
  if (process.env.HELIX_SOURCE_CREDENTIAL) log('HELIX_SOURCE_CREDENTIAL is set, but the live source lane is not built yet: nothing is sent');
}
