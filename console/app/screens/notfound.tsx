import { Link } from 'react-router';

import { useTitle } from '../hooks';

export function NotFound() {
  useTitle('Not found');
  return (
    <>
      <h1>Nothing here</h1>
      <p>
        This console has no screen at this address. Go to the <Link to="/">inbox</Link>.
      </p>
    </>
  );
}
