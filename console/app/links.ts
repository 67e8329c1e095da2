// The console's routes (under the router's basename /console), so that a
// session, a turn or an interrupt has a link that can be pasted anywhere.
const seg = encodeURIComponent;

export const paths = {
  inbox: () => '/',
  sessions: (actionId?: string, status?: string) =>
    actionId ? `/actions/${seg(actionId)}/sessions${status ? `?status=${seg(status)}` : ''}` : '/sessions',
  session: (actionId: string, id: string) => `/sessions/${seg(actionId)}/${seg(id)}`,
  turn: (actionId: string, id: string, turn: number) => `/sessions/${seg(actionId)}/${seg(id)}/turns/${turn}`,
  interrupt: (actionId: string, id: string, interruptId: string) =>
    `/sessions/${seg(actionId)}/${seg(id)}/interrupts/${seg(interruptId)}`,
  actions: () => '/actions',
  action: (id: string) => `/actions/${seg(id)}`,
  ledger: (type?: string) => `/ledger${type ? `?type=${seg(type)}` : ''}`,
};
